//! Which addresses a fetch may not reach unless the user allowed the host, and the DNS
//! resolver that enforces it: every address a name resolves to is checked before any
//! connection, and the connector only ever connects to the checked addresses, so a public
//! name pointing at `127.0.0.1` or a cloud metadata address is refused like the address
//! itself.
//!
//! Refused: loopback, private (RFC 1918, IPv6 unique-local), link-local (`169.254.0.0/16`,
//! where cloud metadata services answer, and `fe80::/10`), carrier-grade NAT
//! (`100.64.0.0/10`), unspecified, `0.0.0.0/8`, broadcast, multicast and reserved ranges,
//! and IPv6 addresses embedding one of those (IPv4-mapped, IPv4-compatible, NAT64).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::Name;

/// Why `ip` must not be reached, or `None` when it may.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private network address")
    } else if ip.is_link_local() {
        Some("a link-local address (where cloud metadata services answer)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a carrier-grade NAT address")
    } else if a == 0 {
        Some("an unspecified address")
    } else if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        Some("a broadcast, multicast or reserved address")
    } else if a == 192 && b == 0 && c == 0 {
        Some("an IETF protocol address")
    } else if a == 198 && (18..20).contains(&b) {
        Some("a benchmarking network address")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if s[0] & 0xfe00 == 0xfc00 {
        return Some("a unique-local (private) address");
    }
    if s[0] & 0xffc0 == 0xfe80 {
        return Some("a link-local address");
    }
    if s[0] & 0xff00 == 0xff00 {
        return Some("a multicast address");
    }
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) carry an IPv4 address.
    if s[..6] == [0, 0, 0, 0, 0, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return forbidden_v4(embedded(s[6], s[7]));
    }
    None
}

/// A resolver for one host: answers only with addresses [`forbidden`] lets through (all of
/// them, when `allow_private`), and otherwise fails, leaving the reason in `refusal`.
#[derive(Clone)]
pub struct CheckedResolver {
    pub allow_private: bool,
    pub refusal: Arc<Mutex<Option<String>>>,
}

type Resolving =
    Pin<Box<dyn Future<Output = std::io::Result<std::vec::IntoIter<SocketAddr>>> + Send>>;

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Resolving;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let me = self.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !me.allow_private {
                if let Some((ip, why)) = addrs
                    .iter()
                    .find_map(|a| forbidden(a.ip()).map(|why| (a.ip(), why)))
                {
                    let message = refusal(&host, Some(ip), why);
                    if let Ok(mut slot) = me.refusal.lock() {
                        *slot = Some(message.clone());
                    }
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        message,
                    ));
                }
            }
            Ok(addrs.into_iter())
        })
    }
}

/// The refusal of `host` (resolving to `ip`, when it is a name) as the model reads it.
pub fn refusal(host: &str, ip: Option<IpAddr>, why: &str) -> String {
    let what = match ip {
        Some(ip) if ip.to_string() != host => format!("{host} resolves to {ip}, {why}"),
        Some(_) | None => format!("{host} is {why}"),
    };
    format!(
        "web_fetch: refused: {what}; openmax does not fetch from private, loopback or \
         link-local addresses unless the user lists the host in [tools.web_fetch] \
         allow_private"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_loopback_metadata_and_their_disguises_are_refused() {
        for bad in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "ff02::1",
        ] {
            assert!(forbidden(ip(bad)).is_some(), "{bad} let through");
        }
        for good in [
            "93.184.215.14",
            "8.8.8.8",
            "2606:4700::1111",
            "172.32.0.1",
            "100.128.0.1",
        ] {
            assert_eq!(forbidden(ip(good)), None, "{good} refused");
        }
    }

    #[test]
    fn the_resolver_checks_what_a_name_resolves_to() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        use tower_service::Service;
        let slot = Arc::new(Mutex::new(None));
        let mut r = CheckedResolver {
            allow_private: false,
            refusal: slot.clone(),
        };
        let name: Name = "localhost".parse().unwrap();
        let err = rt.block_on(r.call(name.clone())).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        let said = slot.lock().unwrap().clone().unwrap();
        assert!(said.contains("localhost resolves to"), "{said}");
        assert!(said.contains("a loopback address"), "{said}");
        r.allow_private = true;
        let addrs: Vec<SocketAddr> = rt.block_on(r.call(name)).unwrap().collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }
}
