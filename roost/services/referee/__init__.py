"""The referee: who may register and spawn, against grants, bounds and the spawn envelope.

:mod:`.service` holds the :class:`~roost.services.referee.service.Referee`; registration, the
registry-answer cache, leases, per-uid quotas and the reservation journal are its parts.
"""
