"""The base every other package stands on: settings (``config``), process set-up (``runtime``),
the cache directory (``cachedir``), command-line parsing helpers (``cliargs``), what the
processes of a job exchange on the host (``processes``), safe reading and writing of files
(``files``), the version.

May import: nothing of sonotile's.
"""
