//! Workloads: the Standard Workload Format reader and writer ([`swf`]), the batch paper's
//! synthetic generator ([`synth`]) and Lee's synthetic utility functions ([`lee`]).

pub mod lee;
pub mod swf;
pub mod synth;
