"""The wire: the RESP codec (sans-IO) and the asyncio connection protocol."""
