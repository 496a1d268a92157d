//! How far inside a network an address lies, for the destination policy of URLs the host
//! did not choose itself (digest §12: "Apply SSRF and destination policy to every
//! metadata, registration, authorization and token URL, including DNS resolution").
//!
//! An OAuth token endpoint is named by the issuer's metadata, and the client secret goes
//! to it. An issuer on the internet that names an address inside the host's network
//! (a private range, link-local, loopback) would have the host send that secret, and a
//! request, wherever it likes behind the firewall. So a URL another party named may
//! lie no further inside than the party that named it: a global issuer's token endpoint
//! must be global, a private one's private or global, a loopback one's anywhere. Where
//! the issuer lies is the address its metadata came from; the check runs on the
//! addresses a connection is about to use, after resolution, so a name that resolves
//! differently the second time (DNS rebinding) reaches nothing inside.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where an address lies, innermost first: `Loopback < Private < Global`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Zone {
    /// This machine: 127.0.0.0/8, ::1, and the unspecified 0.0.0.0 and ::, which a
    /// connection takes to mean this machine (and their IPv4-mapped forms).
    Loopback,
    /// Any other address that is not globally reachable: private and shared ranges,
    /// link-local, site-local, unique-local, documentation, benchmarking, IETF protocol
    /// assignments (but their global blocks), SRv6 SIDs, local-use
    /// NAT64, reserved, broadcast and multicast (the IANA special-purpose registries).
    /// An IPv4-mapped address, one of the well-known NAT64 prefix or a 6to4 one, is the
    /// zone of the IPv4 address it stands for.
    Private,
    /// Globally reachable.
    Global,
}

impl Zone {
    /// The zone of `ip`.
    pub fn of(ip: IpAddr) -> Zone {
        match ip {
            IpAddr::V4(v4) => Zone::of_v4(v4),
            IpAddr::V6(v6) => match v6
                .to_ipv4_mapped()
                .or_else(|| nat64(v6))
                .or_else(|| six_to_four(v6))
            {
                Some(v4) => Zone::of_v4(v4),
                None => Zone::of_v6(v6),
            },
        }
    }

    fn of_v4(ip: Ipv4Addr) -> Zone {
        let [a, b, c, _] = ip.octets();
        let special = a == 0 // "this network"
            || a == 10
            || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
            || (a == 169 && b == 254) // link-local
            || (a == 172 && (16..32).contains(&b))
            || (a == 192 && b == 0 && (c == 0 || c == 2)) // IETF protocol; TEST-NET-1
            || (a == 192 && b == 168)
            || (a == 198 && (b == 18 || b == 19)) // benchmarking
            || (a == 198 && b == 51 && c == 100) // TEST-NET-2
            || (a == 203 && b == 0 && c == 113) // TEST-NET-3
            || a >= 224; // multicast, reserved, broadcast
        Zone::classed(ip.is_loopback() || ip.is_unspecified(), special)
    }

    fn of_v6(ip: Ipv6Addr) -> Zone {
        let [first, second, ..] = ip.segments();
        let special = (first & 0xfe00) == 0xfc00 // unique local fc00::/7
            || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
            || (first & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
            || (first & 0xff00) == 0xff00 // multicast
            || (first == 0x2001 && second == 0x0db8) // documentation
            || (first == 0x3fff && second < 0x1000) // documentation 3fff::/20 (RFC 9637)
            || (first == 0x2001 && second < 0x0200 && !ietf_global(ip)) // IETF protocol assignments 2001::/23
            || first == 0x5f00 // SRv6 SIDs 5f00::/16
            || (first == 0x0100 && ip.segments()[1..4] == [0, 0, 0]) // discard-only 100::/64
            || (first == 0x0064 && ip.segments()[1] == 0xff9b) // the rest of 64:ff9b::/32, local-use NAT64
            || first == 0; // IPv4-compatible and other ::/16 forms
        Zone::classed(ip.is_loopback() || ip.is_unspecified(), special)
    }

    /// An address of this machine is loopback, whatever else it is; else a special one
    /// is private.
    fn classed(this_machine: bool, special: bool) -> Zone {
        match (this_machine, special) {
            (true, _) => Zone::Loopback,
            (false, true) => Zone::Private,
            (false, false) => Zone::Global,
        }
    }
}

/// The blocks of 2001::/23 (IETF protocol assignments, not globally reachable as a whole)
/// that the IANA registry marks globally reachable: anycast services (PCP, TURN, DNS-SD
/// SRP), AMT, AS112-v6, ORCHIDv2 and drone remote ID.
fn ietf_global(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let anycast = s[1] == 1 && s[2..7] == [0; 5] && (1..=3).contains(&s[7]);
    anycast
        || s[1] == 3 // AMT 2001:3::/32
        || (s[1] == 4 && s[2] == 0x0112) // AS112-v6 2001:4:112::/48
        || (s[1] & 0xfff0) == 0x0020 // ORCHIDv2 2001:20::/28
        || (s[1] & 0xfff0) == 0x0030 // drone remote ID 2001:30::/28
}

/// The IPv4 address a well-known-prefix NAT64 address stands for (64:ff9b::/96, RFC
/// 6052): where a connection to it ends up, as an IPv6-only network's DNS64 answers for
/// every IPv4-only host.
fn nat64(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let prefix = s[..6] == [0x0064, 0xff9b, 0, 0, 0, 0];
    prefix.then(|| Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])))
}

/// The IPv4 address a 6to4 address embeds (2002::/16, RFC 3056): a relay carries the
/// packets to it, so 2002:a00:1:: reaches 10.0.0.1's network.
fn six_to_four(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    (s[0] == 0x2002).then(|| Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])))
}

#[cfg(test)]
mod tests {
    use super::Zone;

    #[test]
    fn every_address_falls_in_its_zone() {
        let cases = [
            ("127.0.0.1", Zone::Loopback),
            ("127.255.0.9", Zone::Loopback),
            ("::1", Zone::Loopback),
            ("::ffff:127.0.0.1", Zone::Loopback),
            ("0.0.0.0", Zone::Loopback),
            ("::", Zone::Loopback),
            ("::ffff:0.0.0.0", Zone::Loopback),
            ("0.1.2.3", Zone::Private),
            ("10.1.2.3", Zone::Private),
            ("100.64.0.1", Zone::Private),
            ("169.254.169.254", Zone::Private),
            ("172.16.0.1", Zone::Private),
            ("172.31.255.255", Zone::Private),
            ("192.0.2.2", Zone::Private),
            ("192.168.1.1", Zone::Private),
            ("198.18.0.1", Zone::Private),
            ("203.0.113.5", Zone::Private),
            ("224.0.0.1", Zone::Private),
            ("255.255.255.255", Zone::Private),
            ("fec0::1", Zone::Private),
            ("::a00:1", Zone::Private),
            ("fd00::2", Zone::Private),
            ("fe80::1", Zone::Private),
            ("ff02::1", Zone::Private),
            ("2001:db8::1", Zone::Private),
            ("3fff::1", Zone::Private),
            ("3fff:fff::1", Zone::Private),
            ("3fff:1000::1", Zone::Global),
            ("2001:2::1", Zone::Private),
            ("2001::1", Zone::Private),
            ("2001:1ff::1", Zone::Private),
            ("2001:200::1", Zone::Global),
            ("2001:1::1", Zone::Global),
            ("2001:1::4", Zone::Private),
            ("2001:3::1", Zone::Global),
            ("2001:4:112::1", Zone::Global),
            ("2001:4:113::1", Zone::Private),
            ("2001:20::1", Zone::Global),
            ("2001:3f::1", Zone::Global),
            ("2001:40::1", Zone::Private),
            ("5f00::1", Zone::Private),
            // NAT64 (RFC 6052): the IPv4 address it stands for; local-use NAT64 private.
            ("64:ff9b::a00:1", Zone::Private),
            ("64:ff9b::7f00:1", Zone::Loopback),
            ("64:ff9b::808:808", Zone::Global),
            ("64:ff9b:1::808:808", Zone::Private),
            ("::ffff:10.0.0.1", Zone::Private),
            // 6to4 (RFC 3056): the IPv4 address it embeds.
            ("2002:a00:1::1", Zone::Private),
            ("2002:7f00:1::1", Zone::Loopback),
            ("2002:808:808::1", Zone::Global),
            ("8.8.8.8", Zone::Global),
            ("100.63.255.255", Zone::Global),
            ("100.128.0.1", Zone::Global),
            ("172.15.0.1", Zone::Global),
            ("172.32.0.1", Zone::Global),
            ("192.0.3.1", Zone::Global),
            ("2606:4700::1111", Zone::Global),
            ("::ffff:8.8.8.8", Zone::Global),
        ];
        for (address, zone) in cases {
            assert_eq!(Zone::of(address.parse().unwrap()), zone, "{address}");
        }
        assert!(Zone::Loopback < Zone::Private && Zone::Private < Zone::Global);
    }
}
