//! The S3 listener's limits, so one client cannot starve or kill a node: a connection cap,
//! a deadline for a request's headers (which also closes idle keep-alive connections), and
//! per-key request limits ([`saker_gateway::http::limits`], off by default).

use std::time::Duration;

use saker_gateway::http::limits::KeyLimitConfig;

use crate::parse_duration;

#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// S3 connections open at once; more wait in the listen backlog until one closes.
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// How long a client has to send a request's headers, and how long an HTTP/1.1
    /// connection may sit idle between requests, before it is closed (slow clients).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// Requests of one access key served at once; more are answered 503 SlowDown
    /// (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub key_max_inflight: u32,
    /// Requests per second of one access key (a bucket of one second's requests); more
    /// are answered 503 SlowDown (0: no limit).
    #[arg(long, default_value_t = 0.0)]
    pub key_max_rate: f64,
}

impl LimitArgs {
    pub fn keys(&self) -> KeyLimitConfig {
        KeyLimitConfig {
            max_inflight: self.key_max_inflight,
            max_rate: self.key_max_rate,
        }
    }

    pub fn connections(&self) -> ConnLimits {
        ConnLimits {
            max_connections: self.max_connections.max(1),
            header_timeout: self.header_timeout,
        }
    }
}

/// What one HTTP listener allows its connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

impl ConnLimits {
    /// The admin listener's: a few operators and scrapers.
    pub const ADMIN: ConnLimits = ConnLimits {
        max_connections: 256,
        header_timeout: Duration::from_secs(20),
    };
}
