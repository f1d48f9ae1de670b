//! Known-answer self tests, built in both the host crate and the kernel.
