// SPDX-License-Identifier: GPL-2.0

//! InfiniBand path MTU and its relation to the Ethernet MTU.

/// Bytes an RoCEv2 packet needs beyond its payload, reserved from the netdev MTU.
///
/// Matches `RXE_MAX_HDR_LENGTH` of the C driver: an IPv6 header (40), UDP
/// (8), BTH (12), the largest extended header set (16) and ICRC (4).
pub const ROCE_MAX_HDR_LEN: u32 = 80;

/// An InfiniBand MTU, the largest payload of one packet (IBTA 7.7.9).
///
/// The discriminants are the values of `enum ib_mtu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// Converts an `enum ib_mtu` value, as found in `ib_qp_attr::path_mtu`.
    pub const fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            1 => Some(Self::Mtu256),
            2 => Some(Self::Mtu512),
            3 => Some(Self::Mtu1024),
            4 => Some(Self::Mtu2048),
            5 => Some(Self::Mtu4096),
            _ => None,
        }
    }

    /// Returns the `enum ib_mtu` value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// Returns the MTU in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Self::Mtu256 => 256,
            Self::Mtu512 => 512,
            Self::Mtu1024 => 1024,
            Self::Mtu2048 => 2048,
            Self::Mtu4096 => 4096,
        }
    }

    /// Returns the largest IB MTU not above `bytes`, or `None` below 256.
    pub const fn floor_of(bytes: u32) -> Option<Self> {
        if bytes >= 4096 {
            Some(Self::Mtu4096)
        } else if bytes >= 2048 {
            Some(Self::Mtu2048)
        } else if bytes >= 1024 {
            Some(Self::Mtu1024)
        } else if bytes >= 512 {
            Some(Self::Mtu512)
        } else if bytes >= 256 {
            Some(Self::Mtu256)
        } else {
            None
        }
    }
}

/// Returns the active IB MTU of a port whose netdev has MTU `netdev_mtu`.
///
/// This is the largest IB MTU that fits in `netdev_mtu` minus
/// [`ROCE_MAX_HDR_LEN`], at most 4096. A netdev too small for even 256 bytes
/// gets 256, as `rxe_set_mtu()` of the C driver does.
pub const fn ib_mtu_for_netdev_mtu(netdev_mtu: u32) -> IbMtu {
    match IbMtu::floor_of(netdev_mtu.saturating_sub(ROCE_MAX_HDR_LEN)) {
        Some(mtu) => mtu,
        None => IbMtu::Mtu256,
    }
}
