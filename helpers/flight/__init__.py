"""The flight recorder (lesson 09): what each DataLoader worker, the pin thread and the loop did, per sample and batch."""
from helpers.flight.record import CLOCK, KINDS, MAIN, Event, FlightRecorder, now
from helpers.flight.report import (WorkerShare, chrome_trace, describe, head_of_line_s, overhead, reading_s, slowest, timeline,
                                  waiting_share, workers)

__all__ = ["CLOCK", "KINDS", "MAIN", "Event", "FlightRecorder", "WorkerShare", "chrome_trace", "describe", "head_of_line_s", "now",
           "overhead", "reading_s", "slowest", "timeline", "waiting_share", "workers"]
