//! The sender's timers: one deadline per `Timer`, in one table (after quinn-proto's
//! `TimerTable`). `poll_timeout` is the earliest entry; `handle_timeout` serves the expired
//! ones in `Timer::ALL` order. Deadlines follow from the sender's state: `Sender::arm_timers`
//! sets the table before it is read, and again after each timer served (serving one can
//! move another).

use crate::Nanos;

/// A sender timer. The order of `ALL` is the order `handle_timeout` serves them in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// FlashPass: scheduled data not acknowledged within an RTO is lost.
    ScheduledDataLoss,
    /// HELLO retransmission (the timeout doubles each time), then the flow fails.
    Hello,
    /// DCTCP's tail-loss probe (RFC 8985 §7).
    TailLossProbe,
    /// Retransmission timeout of the reactive sub-flow.
    Rto,
    /// Credit-based transports: the proactive sub-flow's recovery timer.
    Recovery,
    /// Credit-based transports: CREDIT_STOP after `credit_stop_timeout` with nothing to do.
    CreditStop,
    /// PPT: the LCP loop closes 2 RTTs after its last low-priority ACK.
    LcpClose,
    // Wake-ups: `poll_transmit` has something to send then; `handle_timeout` does nothing.
    /// PPT: the LCP's next paced packet.
    LcpPace,
    /// PASE: the next probe of a flow in the lowest queue (§3.3).
    PaseProbe,
    /// FlashPass: the next data slot T + T_wait.
    Slot,
    /// FlashPass: the next paced emulation packet.
    Emulation,
    /// FlashPass: the emulation's loss / Algorithm 1 timer (`Emulation::on_timer` runs on
    /// every timeout).
    EmulationControl,
    /// FlashPass: the next unscheduled (pre-credit) packet.
    Unscheduled,
}

impl Timer {
    const COUNT: usize = 13;
    pub(super) const ALL: [Timer; Timer::COUNT] = [
        Timer::ScheduledDataLoss,
        Timer::Hello,
        Timer::TailLossProbe,
        Timer::Rto,
        Timer::Recovery,
        Timer::CreditStop,
        Timer::LcpClose,
        Timer::LcpPace,
        Timer::PaseProbe,
        Timer::Slot,
        Timer::Emulation,
        Timer::EmulationControl,
        Timer::Unscheduled,
    ];

    /// Only a wake-up for `poll_transmit`: nothing to do in `handle_timeout`.
    pub(super) fn is_wake_up(self) -> bool {
        match self {
            Timer::LcpPace
            | Timer::PaseProbe
            | Timer::Slot
            | Timer::Emulation
            | Timer::EmulationControl
            | Timer::Unscheduled => true,
            Timer::ScheduledDataLoss
            | Timer::Hello
            | Timer::TailLossProbe
            | Timer::Rto
            | Timer::Recovery
            | Timer::CreditStop
            | Timer::LcpClose => false,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TimerTable {
    deadlines: [Option<Nanos>; Timer::COUNT],
}

impl TimerTable {
    pub(super) fn set(&mut self, timer: Timer, deadline: Option<Nanos>) {
        self.deadlines[timer as usize] = deadline;
    }

    pub(super) fn get(&self, timer: Timer) -> Option<Nanos> {
        self.deadlines[timer as usize]
    }

    pub(super) fn is_expired(&self, timer: Timer, now: Nanos) -> bool {
        self.get(timer).is_some_and(|d| now >= d)
    }

    /// The earliest deadline.
    pub(super) fn next(&self) -> Option<Nanos> {
        self.deadlines.iter().flatten().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_timer_once_at_its_index() {
        for (i, t) in Timer::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
        }
    }

    #[test]
    fn next_is_the_earliest_deadline() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Rto, Some(50));
        t.set(Timer::Hello, Some(20));
        t.set(Timer::Slot, Some(30));
        assert_eq!(t.next(), Some(20));
        t.set(Timer::Hello, None);
        assert_eq!(t.next(), Some(30));
        assert!(t.is_expired(Timer::Rto, 50) && !t.is_expired(Timer::Rto, 49));
    }
}
