"""`python -m emqd.client` is the same as the `emqd-worker` command."""

from emqd.client.worker_command import main

if __name__ == "__main__":
    main()
