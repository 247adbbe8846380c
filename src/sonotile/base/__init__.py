"""The base every other package stands on: settings (``config``), process set-up (``runtime``),
the cache directory (``cachedir``), command-line parsing helpers (``cliargs``), safe reading and
writing of files (``files``), the version.

May import: nothing of sonotile's.
"""
