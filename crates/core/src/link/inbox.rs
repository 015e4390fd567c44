//! Where a sender files what it receives while it waits to send: a client
//! blocked on a full ring drains its incoming ring meanwhile, because the
//! server may be blocked writing responses to it and would never read on.

use std::collections::VecDeque;

use crate::message::{Assembler, Message};

/// The session's reassembly state and its queue of whole messages, lent to
/// a link for the length of one send.
#[derive(Debug)]
pub(crate) struct Inbox<'a> {
    /// The session's reassembly state.
    pub(crate) asm: &'a mut Assembler,
    /// Whole messages received.
    pub(crate) out: &'a mut VecDeque<Message>,
}
