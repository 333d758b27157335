//! The defence against untrusted input, behind the seams of a decode pass
//! ([`super::decode_pass`]): what nvCOMP does not check is checked here
//! before it sees an untrusted piece.
//!
//! - [`host_copies`]: device inputs copied to the host for the host check;
//! - [`check_ahead`]: the host check run ahead of a pass, by its caller;
//! - [`huffman`]: Zstandard literals' Huffman streams, checked on the device;
//! - [`inflate`]: raw DEFLATE streams (deflate, gzip), walked on the device;
//! - [`sequences`]: Zstandard frames' sequences, walked on the device.
//!
//! The host check itself reads the formats ([`crate::format`]), and the
//! isolated worker ([`super::isolation`]) decodes what remains untrusted.

pub(super) mod check_ahead;
pub(super) mod host_copies;
pub(super) mod huffman;
pub(super) mod inflate;
pub(super) mod sequences;
