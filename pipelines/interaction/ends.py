"""How a conversation ends, and which ends leave it incomplete (not scored, counted apart, resumed).

* ``sql`` / ``feedback``: the system's terminal answer;
* ``give_up``: the system answered nothing usable (empty, unreadable, a question on the final turn,
  a custom agent's exception): scored against the system, as in the reference code;
* ``user_failed``: a user turn could not be produced (a council call failed or was unreadable);
* ``system_failed``: the system's endpoint did not answer (a transport failure after the council's
  retries: HTTP 5xx, timeout, refused connection), on a turn or on the classification its
  predicted-mode dialogue needs. The system never answered, so nothing is scored against it.

Incomplete conversations are left out of EX / FB and every dialogue statistic, counted apart, mark
the tables provisional, and the same command completes them: failed calls are not cached.
"""

USER_FAILED = "user_failed"
SYSTEM_FAILED = "system_failed"
INCOMPLETE_ENDS = (USER_FAILED, SYSTEM_FAILED)
ENDS = ("sql", "feedback", "give_up", *INCOMPLETE_ENDS)
# a CallResult status that means no answer arrived (the council layer's transport failure)
TRANSPORT_FAILURE = "call_failed"
