"""What the student's file includes and what it compiled to, held to allowlists before anything of it
runs (includes, objcheck, elf, allowlist.toml), and the technique checks (techniques). It reads and
judges; it builds nothing (static_checks: the screen and inspect stages)."""
