//! Where an auth service may be. The URL is a tenant's (`auth-url` on an
//! Ingress), and the agent asks it from inside the HAProxy pod: without a
//! rule, a tenant could point it at the pod's own loopback (the agent's API,
//! HAProxy's runtime sockets behind a TCP bind) or a link-local address (a
//! cloud's metadata service) and have the answer's headers copied to its own
//! backend. So the agent never connects to a loopback, unspecified or
//! link-local address, whether the URL names one or a name resolves to one;
//! `--spoa-allow-loopback` lifts the loopback part for `haptic run` and
//! tests, where everything is on one machine.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};

/// Which addresses the agent refuses to reach an auth service at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    pub allow_loopback: bool,
}

impl Reach {
    /// Why `ip` may not be an auth service's address, if it may not.
    pub fn refuses(self, ip: IpAddr) -> Option<&'static str> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let link_local = match ip {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        };
        if ip.is_unspecified() {
            Some("the unspecified address")
        } else if link_local {
            Some("a link-local address (where cloud metadata services answer)")
        } else if ip.is_loopback() && !self.allow_loopback {
            Some("the HAProxy pod's own loopback")
        } else {
            None
        }
    }
}

/// The system resolver, with every address [`Reach`] refuses left out; a
/// name that resolves to nothing else is an error naming it.
#[derive(Debug, Clone)]
pub struct CheckedResolver {
    inner: GaiResolver,
    reach: Reach,
}

impl CheckedResolver {
    pub fn new(reach: Reach) -> Self {
        Self {
            inner: GaiResolver::new(),
            reach,
        }
    }
}

type Resolving =
    Pin<Box<dyn Future<Output = Result<std::vec::IntoIter<SocketAddr>, std::io::Error>> + Send>>;

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Resolving;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let reach = self.reach;
        let resolving = self.inner.call(name.clone());
        Box::pin(async move {
            let mut refused = None;
            let allowed: Vec<SocketAddr> = resolving
                .await?
                .filter(|address| match reach.refuses(address.ip()) {
                    Some(why) => {
                        refused = Some(why);
                        false
                    }
                    None => true,
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(why)) => Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{name} resolves only to {why}, which the agent never calls (auth services, mirror targets)"
                    ),
                )),
                _ => Ok(allowed.into_iter()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_link_local_and_unspecified_are_refused() {
        let strict = Reach {
            allow_loopback: false,
        };
        for refused in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "169.254.169.254",
            "fe80::1",
            "0.0.0.0",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let ip: IpAddr = refused.parse().expect("address");
            assert!(strict.refuses(ip).is_some(), "{refused}");
        }
        for allowed in ["10.96.0.10", "192.168.1.1", "fd00::1", "8.8.8.8"] {
            let ip: IpAddr = allowed.parse().expect("address");
            assert_eq!(strict.refuses(ip), None, "{allowed}");
        }
        let local = Reach {
            allow_loopback: true,
        };
        assert_eq!(local.refuses("127.0.0.1".parse().expect("address")), None);
        assert!(
            local
                .refuses("169.254.169.254".parse().expect("address"))
                .is_some()
        );
    }
}
