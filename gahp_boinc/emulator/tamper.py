"""A hostile project, for tests: the emulator's answers spoiled on purpose.

Empty (the default), it changes nothing. Tests set its fields on a running emulator
(``EmulatorServer.tamper``) to play a compromised server, or one reached over a tampered
``http://`` path:

- ``template_outputs``: app name -> the output names get_templates announces (the jobs
  still produce the app's real outputs), e.g. an absolute path or ``../x``;
- ``no_canonical``: job names whose query_completed_job says ``canonical_resultid`` 0
  although query_batch2 says DONE;
- ``output_bytes``: job name -> the bytes get_output.php and get_output2.php serve as any
  of its output files
  (a zip bomb, an archive with hostile member names).
"""

from __future__ import annotations

import attrs


@attrs.define
class Tampering:
    """What the emulated project answers wrongly; nothing by default."""

    template_outputs: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    no_canonical: set[str] = attrs.field(factory=set)
    output_bytes: dict[str, bytes] = attrs.field(factory=dict)
