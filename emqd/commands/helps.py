"""`<CONTAINER> HELP`: Redis 7.0's help texts, verbatim.

Tools and people read these as Redis writes them, so the texts are Redis's,
subcommands emqd does not support included (those answer `unknown
subcommand`, as docs/SERVER.md says). `help_reply` frames a body as Redis's
addReplyHelp does: a header line naming the container, the body, then HELP.
"""

from __future__ import annotations

CONFIG = """\
GET <pattern>
    Return parameters matching the glob-like <pattern> and their values.
SET <directive> <value>
    Set the configuration <directive> to <value>.
RESETSTAT
    Reset statistics reported by the INFO command.
REWRITE
    Rewrite the configuration file.
"""

CLIENT = """\
CACHING (YES|NO)
    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.
GETREDIR
    Return the client ID we are redirecting to when tracking is enabled.
GETNAME
    Return the name of the current connection.
ID
    Return the ID of the current connection.
INFO
    Return information about the current client connection.
KILL <ip:port>
    Kill connection made from <ip:port>.
KILL <option> <value> [<option> <value> [...]]
    Kill connections. Options are:
    * ADDR (<ip:port>|<unixsocket>:0)
      Kill connections made from the specified address
    * LADDR (<ip:port>|<unixsocket>:0)
      Kill connections made to specified local address
    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)
      Kill connections by type.
    * USER <username>
      Kill connections authenticated by <username>.
    * SKIPME (YES|NO)
      Skip killing current connection (default: yes).
LIST [options ...]
    Return information about client connections. Options:
    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)
      Return clients of specified type.
UNPAUSE
    Stop the current client pause, resuming traffic.
PAUSE <timeout> [WRITE|ALL]
    Suspend all, or just write, clients for <timeout> milliseconds.
REPLY (ON|OFF|SKIP)
    Control the replies sent to the current connection.
SETNAME <name>
    Assign the name <name> to the current connection.
UNBLOCK <clientid> [TIMEOUT|ERROR]
    Unblock the specified blocked client.
TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]
         [OPTIN] [OPTOUT] [NOLOOP]
    Control server assisted client side caching.
TRACKINGINFO
    Report tracking status for the current connection.
NO-EVICT (ON|OFF)
    Protect current client connection from eviction.
"""

MEMORY = """\
DOCTOR
    Return memory problems reports.
MALLOC-STATS
    Return internal statistics report from the memory allocator.
PURGE
    Attempt to purge dirty pages for reclamation by the allocator.
STATS
    Return information about the memory usage of the server.
USAGE <key> [SAMPLES <count>]
    Return memory in bytes used by <key> and its value. Nested values are
    sampled up to <count> times (default: 5, 0 means sample all).
"""

OBJECT = """\
ENCODING <key>
    Return the kind of internal representation used in order to store the value
    associated with a <key>.
FREQ <key>
    Return the access frequency index of the <key>. The returned integer is
    proportional to the logarithm of the recent access frequency of the key.
IDLETIME <key>
    Return the idle time of the <key>, that is the approximated number of
    seconds elapsed since the last access to the key.
REFCOUNT <key>
    Return the number of references of the value associated with the specified
    <key>.
"""

FUNCTION = """\
LOAD [REPLACE] <FUNCTION CODE>
    Create a new library with the given library name and code.
DELETE <LIBRARY NAME>
    Delete the given library.
LIST [LIBRARYNAME PATTERN] [WITHCODE]
    Return general information on all the libraries:
    * Library name
    * The engine used to run the Library
    * Library description
    * Functions list
    * Library code (if WITHCODE is given)
    It also possible to get only function that matches a pattern using LIBRARYNAME argument.
STATS
    Return information about the current function running:
    * Function name
    * Command used to run the function
    * Duration in MS that the function is running
    If no function is running, return nil
    In addition, returns a list of available engines.
KILL
    Kill the current running function.
FLUSH [ASYNC|SYNC]
    Delete all the libraries.
    When called without the optional mode argument, the behavior is determined by the
    lazyfree-lazy-user-flush configuration directive. Valid modes are:
    * ASYNC: Asynchronously flush the libraries.
    * SYNC: Synchronously flush the libraries.
DUMP
    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command
RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]
    Restore the libraries represented by the given payload, it is possible to give a restore policy to
    control how to handle existing libraries (default APPEND):
    * FLUSH: delete all existing libraries.
    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.
    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old
      libraries with the new libraries (notice that even on this option there is a chance of failure
      in case of functions name collision with another library).
"""


def help_reply(container: str, body: str) -> list[str]:
    """The reply: simple strings, the header and HELP's own entry around `body`."""
    header = f"{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    return [header, *body.splitlines(), "HELP", "    Prints this help."]
