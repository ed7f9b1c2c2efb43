//! Address classification: which IP addresses the egress exit will not connect to.
//!
//! Contract:
//! - [`classify`] is pure and total: every address is either `None` (a public, globally routed
//!   unicast address) or exactly one [`AddressClass`] naming why it is forbidden.
//! - IPv6 forms that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
//!   `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address they carry,
//!   so `::ffff:127.0.0.1` is loopback and `64:ff9b::a00:5` is private. IPv4-mapped and
//!   IPv4-compatible forms are refused even when the address inside is public: no legitimate DNS
//!   answer carries one, and some stacks connect to the embedded address anyway.
//! - IPv6 outside global unicast (`2000::/3`) is refused as reserved.
//! - Refuses nothing by itself: whether a class may be reached is the allowlist's call
//!   (`allow_private = true` on the matching entry), made in [`check_addresses`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{AddressClass, BlockReason};

/// Why `ip` may not be connected to, or `None` for a public unicast address.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Blocks unless every address is public, or `allow_private` is set. One bad address blocks
/// the lot: the exit never picks a "good" one out of a mixed answer. An empty list is refused
/// too (there is nothing checked to connect to).
pub fn check_addresses(addrs: &[IpAddr], allow_private: bool) -> Result<(), BlockReason> {
    if addrs.is_empty() {
        return Err(BlockReason::NoAddress);
    }
    if allow_private {
        return Ok(());
    }
    for addr in addrs {
        if let Some(class) = classify(*addr) {
            return Err(BlockReason::ForbiddenAddress { addr: *addr, class });
        }
    }
    Ok(())
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    // Order matters: the most specific ranges first (metadata inside link-local and CGNAT,
    // unspecified inside "this network").
    const TABLE: &[([u8; 4], u32, AddressClass)] = &[
        ([169, 254, 169, 254], 32, AddressClass::CloudMetadata),
        ([169, 254, 170, 2], 32, AddressClass::CloudMetadata),
        ([168, 63, 129, 16], 32, AddressClass::CloudMetadata),
        ([100, 100, 100, 200], 32, AddressClass::CloudMetadata),
        ([0, 0, 0, 0], 32, AddressClass::Unspecified),
        ([255, 255, 255, 255], 32, AddressClass::Broadcast),
        ([0, 0, 0, 0], 8, AddressClass::Reserved),
        ([10, 0, 0, 0], 8, AddressClass::Private),
        ([100, 64, 0, 0], 10, AddressClass::Cgnat),
        ([127, 0, 0, 0], 8, AddressClass::Loopback),
        ([169, 254, 0, 0], 16, AddressClass::LinkLocal),
        ([172, 16, 0, 0], 12, AddressClass::Private),
        ([192, 0, 0, 0], 24, AddressClass::Reserved),
        ([192, 0, 2, 0], 24, AddressClass::Documentation),
        ([192, 88, 99, 0], 24, AddressClass::Reserved),
        ([192, 168, 0, 0], 16, AddressClass::Private),
        ([198, 18, 0, 0], 15, AddressClass::Reserved),
        ([198, 51, 100, 0], 24, AddressClass::Documentation),
        ([203, 0, 113, 0], 24, AddressClass::Documentation),
        ([224, 0, 0, 0], 4, AddressClass::Multicast),
        ([240, 0, 0, 0], 4, AddressClass::Reserved),
    ];
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, class)| *class)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    (u128::from(ip) & mask) == (u128::from(Ipv6Addr::from(net)) & mask)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let bits = u128::from(ip);
    let low_v4 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if ip == Ipv6Addr::UNSPECIFIED {
        return Some(AddressClass::Unspecified);
    }
    if ip == Ipv6Addr::LOCALHOST {
        return Some(AddressClass::Loopback);
    }
    // ::ffff:a.b.c.d
    if in_v6(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96) {
        return Some(classify_v4(low_v4).unwrap_or(AddressClass::Ipv4Mapped));
    }
    // ::a.b.c.d (deprecated IPv4-compatible)
    if in_v6(ip, [0; 8], 96) {
        return Some(classify_v4(low_v4).unwrap_or(AddressClass::Ipv4Compatible));
    }
    // NAT64 well-known prefix: judged by the IPv4 address it reaches.
    if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return classify_v4(low_v4);
    }
    // 6to4: the IPv4 address sits in bits 16..48.
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        let embedded = Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32);
        return classify_v4(embedded);
    }
    const TABLE: &[([u16; 8], u32, AddressClass)] = &[
        (
            [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254],
            128,
            AddressClass::CloudMetadata,
        ),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, AddressClass::Private),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, AddressClass::LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, AddressClass::Reserved),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, AddressClass::Multicast),
        (
            [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0],
            32,
            AddressClass::Documentation,
        ),
        (
            [0x3fff, 0, 0, 0, 0, 0, 0, 0],
            20,
            AddressClass::Documentation,
        ),
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, AddressClass::Reserved),
    ];
    if let Some((_, _, class)) = TABLE
        .iter()
        .find(|(net, prefix, _)| in_v6(ip, *net, *prefix))
    {
        return Some(*class);
    }
    if !in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return Some(AddressClass::Reserved);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse()
            .unwrap_or_else(|e| panic!("bad test address {text}: {e}"))
    }

    #[test]
    fn internal_addresses_in_any_spelling_are_classified_as_forbidden() {
        use AddressClass::*;
        let cases: &[(&str, Option<AddressClass>)] = &[
            ("127.0.0.1", Some(Loopback)),
            ("127.255.1.2", Some(Loopback)),
            ("10.0.0.5", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(Private)),
            ("169.254.1.1", Some(LinkLocal)),
            ("169.254.169.254", Some(CloudMetadata)),
            ("100.64.0.1", Some(Cgnat)),
            ("100.127.255.255", Some(Cgnat)),
            ("100.128.0.1", None),
            ("224.0.0.1", Some(Multicast)),
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Reserved)),
            ("255.255.255.255", Some(Broadcast)),
            ("240.0.0.1", Some(Reserved)),
            ("192.0.2.7", Some(Documentation)),
            ("198.51.100.7", Some(Documentation)),
            ("203.0.113.7", Some(Documentation)),
            ("198.18.0.1", Some(Reserved)),
            ("93.184.215.14", None),
            ("8.8.8.8", None),
            ("::1", Some(Loopback)),
            ("::", Some(Unspecified)),
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:7f00:1", Some(Loopback)),
            ("::127.0.0.1", Some(Loopback)),
            ("::ffff:10.0.0.5", Some(Private)),
            ("::ffff:169.254.169.254", Some(CloudMetadata)),
            ("::ffff:8.8.8.8", Some(Ipv4Mapped)),
            ("::8.8.8.8", Some(Ipv4Compatible)),
            ("64:ff9b::a00:5", Some(Private)),
            ("64:ff9b::808:808", None),
            ("2002:7f00:1::", Some(Loopback)),
            ("2002:808:808::", None),
            ("fc00::1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("fd00:ec2::254", Some(CloudMetadata)),
            ("fe80::1", Some(LinkLocal)),
            ("fec0::1", Some(Reserved)),
            ("ff02::1", Some(Multicast)),
            ("2001:db8::1", Some(Documentation)),
            ("2001:0::1", Some(Reserved)),
            ("100::1", Some(Reserved)),
            ("2606:4700::1111", None),
            ("2a00:1450:4001::1", None),
        ];
        for (text, want) in cases {
            assert_eq!(classify(ip(text)), *want, "{text}");
        }
    }

    #[test]
    fn one_bad_address_in_an_answer_blocks_the_whole_answer() {
        let mixed = [ip("93.184.215.14"), ip("10.0.0.5")];
        assert_eq!(
            check_addresses(&mixed, false),
            Err(BlockReason::ForbiddenAddress {
                addr: ip("10.0.0.5"),
                class: AddressClass::Private
            })
        );
        assert_eq!(check_addresses(&mixed, true), Ok(()));
        assert_eq!(check_addresses(&[ip("8.8.8.8")], false), Ok(()));
        assert_eq!(check_addresses(&[], true), Err(BlockReason::NoAddress));
    }
}
