"""`emqd-worker module:function --queue NAME`, also as `python -m emqd.worker`.

The command itself lives in emqd/client/cli.py; this is its thin entry point.
"""

from emqd.client.cli import main

if __name__ == "__main__":
    main()
