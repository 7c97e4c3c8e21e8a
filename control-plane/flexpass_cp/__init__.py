"""FlexPass control plane.

Tools for configuring P4 switches for FlexPass (credit queue, DWRR weights,
selective dropping of reactive traffic, DSCP classification) and the FlexPass
wire protocol for Python:

* :mod:`flexpass_cp.scapy_flexpass` -- Scapy layers plus a strict
  ``decode``/``validate``/``encode`` that follow docs/protocol.md exactly.
* :mod:`flexpass_cp.dscp` -- the DSCP plan and ECN code points.
* :mod:`flexpass_cp.config` -- the switch config (YAML) and what it compiles to.
* :mod:`flexpass_cp.backends` -- one backend per switch target, behind
  :mod:`flexpass_cp.cli` (``flexpass-ctl``) and :mod:`flexpass_cp.controller`.
"""

__version__ = "0.1.0"
