//! Where an array's elements are: selections of an array ([`selection`]),
//! the plan of the chunks a selection touches and of each chunk's part of it
//! ([`plan`]), the strided box copies between chunks and selections
//! ([`box_copy`]), and the size limits reads and writes check ([`limits`]).

pub(crate) mod box_copy;
pub(crate) mod limits;
pub(crate) mod plan;
pub(crate) mod selection;
