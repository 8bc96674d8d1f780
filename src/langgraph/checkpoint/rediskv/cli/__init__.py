"""The inspection and maintenance commands of ``rediskv``.

:mod:`..__main__` declares the arguments and imports a command's module only when it runs.
Each ``cmd_*`` function takes the parsed arguments and returns the exit code; it first
gathers its result as plain data, then prints it as JSON (``--json``) or with ``rich``.

* :mod:`.threads`: ``threads``, ``history``, ``show`` (reading threads)
* :mod:`.maintenance`: ``delete``, ``prune``, ``copy``, ``reindex`` (changing the store),
  ``libraries`` (the server's function libraries of this package)
* :mod:`.inspect`: ``stats``, ``doctor`` (the prefix and the server as a whole)
* :mod:`.store`: what the commands read beyond the saver's API, and how much it costs
* :mod:`.output`: JSON and ``rich`` output
* :mod:`.common`: the connection, user errors, configs

Cost: a fact about one thread is read from that thread's own keys (its root ``P:th:{T}``,
its indexes, the keys they lead to), never by a SCAN of the keyspace; a command that must
find every thread makes one SCAN pass. So ``threads --limit 50`` or ``prune`` of named
threads costs what those threads hold, not what the database holds.

Privileges: the commands send only what the saver sends (see the README's Security section),
plus three optional ones that a least-privilege user may lack: ``MEMORY USAGE`` (sizes are
then reported as unknown), ``INFO`` and ``CONFIG GET`` (doctor's server checks are then
"unknown"). ``ZCARD``, when refused, is replaced by counting with ``ZRANGE``.
"""
