//! Hand-built captures through the whole tool: each rule's flag fires on
//! a capture that breaks it and stays quiet on one that does not.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]
#![allow(clippy::arithmetic_side_effects, clippy::cast_possible_truncation)]

use std::net::IpAddr;

use rdma_wire::{analyze, Analyzer, Options};
use rpcrdma_proto::chunk::{ChunkSlices, ReadSegment, Segment};
use rpcrdma_proto::header::{FixedHeader, MsgType};
use rpcrdma_proto::pvt::PrivateData;
use rpcrdma_proto::{v1, v2};

const CLIENT: &str = "192.0.2.2";
const SERVER: &str = "192.0.2.1";
const CLIENT6: &str = "2001:db8::2";
const SERVER6: &str = "2001:db8::1";
/// The client's and the server's QPs.
const CQP: u32 = 0x11;
const SQP: u32 = 0x12;

/// One packet to put in a capture: bytes and how many of them to keep.
struct Pkt {
    frame: Vec<u8>,
    caplen: Option<usize>,
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Ethernet + IPv4/IPv6 + UDP(4791) around an IB packet.
fn frame(src: &str, dst: &str, ib: &[u8]) -> Vec<u8> {
    let mut udp = Vec::new();
    udp.extend_from_slice(&49152u16.to_be_bytes());
    udp.extend_from_slice(&4791u16.to_be_bytes());
    udp.extend_from_slice(&((8 + ib.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(ib);
    let mut f = vec![0x52, 0x54, 0, 0, 0, 1, 0x52, 0x54, 0, 0, 0, 2];
    match (ip(src), ip(dst)) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            f.extend_from_slice(&[0x45, 0]);
            f.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(udp.len() as u16).to_be_bytes());
            f.extend_from_slice(&[17, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => panic!("mixed families"),
    }
    f.extend_from_slice(&udp);
    f
}

/// BTH + extended headers + payload + pad + ICRC.
fn ib(opcode: u8, qp: u32, psn: u32, ext: &[u8], payload: &[u8]) -> Vec<u8> {
    let pad = (4 - payload.len() % 4) % 4;
    let mut b = vec![opcode, (pad as u8) << 4, 0xff, 0xff];
    b.extend_from_slice(&qp.to_be_bytes());
    b.extend_from_slice(&psn.to_be_bytes());
    b.extend_from_slice(ext);
    b.extend_from_slice(payload);
    b.resize(b.len() + pad, 0);
    b.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    b
}

fn reth(va: u64, rkey: u32, len: u32) -> Vec<u8> {
    let mut v = va.to_be_bytes().to_vec();
    v.extend_from_slice(&rkey.to_be_bytes());
    v.extend_from_slice(&len.to_be_bytes());
    v
}

fn pkt(src: &str, dst: &str, ibp: Vec<u8>) -> Pkt {
    Pkt {
        frame: frame(src, dst, &ibp),
        caplen: None,
    }
}

/// A Send-only packet.
fn send(src: &str, dst: &str, qp: u32, psn: u32, msg: &[u8]) -> Pkt {
    pkt(src, dst, ib(0x04, qp, psn, &[], msg))
}

fn pcap(pkts: &[Pkt]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (i, p) in pkts.iter().enumerate() {
        let cap = p.caplen.unwrap_or(p.frame.len()).min(p.frame.len());
        f.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        f.extend_from_slice(&(i as u32 * 100).to_le_bytes());
        f.extend_from_slice(&(cap as u32).to_le_bytes());
        f.extend_from_slice(&(p.frame.len() as u32).to_le_bytes());
        f.extend_from_slice(&p.frame[..cap]);
    }
    f
}

/// The same packets as pcapng: a section, one interface, enhanced blocks.
fn pcapng(pkts: &[Pkt]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, btype: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while body.len() % 4 != 0 {
            body.push(0);
        }
        let total = (body.len() + 12) as u32;
        out.extend_from_slice(&btype.to_le_bytes());
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&total.to_le_bytes());
    }
    let mut f = Vec::new();
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    block(&mut f, 0x0a0d_0d0a, &shb);
    let mut idb = 1u16.to_le_bytes().to_vec();
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&65535u32.to_le_bytes());
    block(&mut f, 1, &idb);
    for p in pkts {
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&1_000_000u32.to_le_bytes());
        epb.extend_from_slice(&(p.frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(p.frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&p.frame);
        block(&mut f, 6, &epb);
    }
    f
}

/// An RPC message of `len` bytes starting with XID and msg_type.
fn rpc(xid: u32, t: MsgType, len: usize) -> Vec<u8> {
    let mut m = xid.to_be_bytes().to_vec();
    m.extend_from_slice(&t.to_u32().to_be_bytes());
    m.resize(len.max(8), 0);
    m
}

fn v1_msg(xid: u32, credits: u32, chunks: ChunkSlices<'_>, t: MsgType, rpc_len: usize) -> Vec<u8> {
    let mut buf = vec![0; 4096];
    let fixed = FixedHeader {
        xid,
        vers: 1,
        credits,
    };
    let n = v1::encode(&mut buf, &fixed, &v1::Message::Msg(chunks)).unwrap();
    buf.truncate(n);
    buf.extend_from_slice(&rpc(xid, t, rpc_len));
    buf
}

fn v1_nomsg(xid: u32, credits: u32, chunks: ChunkSlices<'_>) -> Vec<u8> {
    let mut buf = vec![0; 4096];
    let fixed = FixedHeader {
        xid,
        vers: 1,
        credits,
    };
    let n = v1::encode(&mut buf, &fixed, &v1::Message::Nomsg(chunks)).unwrap();
    buf.truncate(n);
    buf
}

fn v2_msg(xid: u32, credits: u32, chunks: ChunkSlices<'_>, t: MsgType, inv: u32) -> Vec<u8> {
    let mut buf = vec![0; 4096];
    let fixed = FixedHeader {
        xid,
        vers: 2,
        credits,
    };
    let c = v2::Chunks {
        direction: t,
        inv_handle: inv,
        lists: chunks,
    };
    let n = v2::encode(&mut buf, &fixed, &v2::Message::Msg(c)).unwrap();
    buf.truncate(n);
    buf.extend_from_slice(&rpc(xid, t, 100));
    buf
}

const WSEG: Segment = Segment {
    handle: 0xabc,
    length: 8192,
    offset: 0x1000_0000,
};

fn call_with_write(xid: u32) -> Vec<u8> {
    let writes: &[&[Segment]] = &[&[WSEG]];
    v1_msg(
        xid,
        32,
        ChunkSlices {
            writes,
            ..ChunkSlices::NONE
        },
        MsgType::Call,
        120,
    )
}

fn reply_with_write(xid: u32, credits: u32) -> Vec<u8> {
    let done = Segment {
        length: 8192,
        ..WSEG
    };
    let writes: &[&[Segment]] = &[&[done]];
    v1_msg(
        xid,
        credits,
        ChunkSlices {
            writes,
            ..ChunkSlices::NONE
        },
        MsgType::Reply,
        100,
    )
}

/// A CM MAD (UD Send to QP1) of `attr` with the CM message `cm`.
fn mad(src: &str, dst: &str, attr: u16, cm: &[u8]) -> Pkt {
    let mut m = vec![1, 0x07, 2, 3, 0, 0, 0, 0];
    m.extend_from_slice(&[0; 8]);
    m.extend_from_slice(&attr.to_be_bytes());
    m.extend_from_slice(&[0; 6]);
    m.extend_from_slice(cm);
    m.resize(256, 0);
    let mut deth = 0x8001_0000u32.to_be_bytes().to_vec();
    deth.extend_from_slice(&1u32.to_be_bytes());
    pkt(src, dst, ib(0x64, 1, 0, &deth, &m))
}

/// REQ from the client's QP, REP from the server's, with private data.
fn handshake(client: &str, server: &str, cpvt: PrivateData, spvt: PrivateData) -> Vec<Pkt> {
    let mut req = vec![0; 232];
    req[0..4].copy_from_slice(&0x1111u32.to_be_bytes());
    req[32..36].copy_from_slice(&(CQP << 8).to_be_bytes());
    req[140 + 36..140 + 44].copy_from_slice(&cpvt.encode());
    let mut rep = vec![0; 232];
    rep[0..4].copy_from_slice(&0x2222u32.to_be_bytes());
    rep[4..8].copy_from_slice(&0x1111u32.to_be_bytes());
    rep[12..16].copy_from_slice(&(SQP << 8).to_be_bytes());
    rep[36..44].copy_from_slice(&spvt.encode());
    vec![
        mad(client, server, 0x0010, &req),
        mad(server, client, 0x0013, &rep),
    ]
}

const PVT4K: PrivateData = PrivateData {
    remote_invalidate: true,
    send_size: 4096,
    recv_size: 4096,
};

fn run(pkts: &[Pkt]) -> Analyzer {
    run_with(pkts, Options::default())
}

fn run_with(pkts: &[Pkt], opts: Options) -> Analyzer {
    let a = analyze(&pcap(pkts), opts).unwrap();
    for l in &a.lines {
        eprintln!("{l}");
    }
    eprintln!("{}", a.summary.line());
    a
}

fn flagged_with(a: &Analyzer, what: &str) -> bool {
    a.lines.iter().any(|l| l.contains("!!") && l.contains(what))
}

/// A correct exchange: Call advertising a Write chunk, the server's RDMA
/// Write into it, the Reply; then the same over a connection whose
/// handshake the capture holds.
fn good_exchange(c: &str, s: &str) -> Vec<Pkt> {
    vec![
        send(c, s, SQP, 100, &call_with_write(7)),
        pkt(
            s,
            c,
            ib(0x0a, CQP, 500, &reth(0x1000_0000, 0xabc, 8192), &[0; 64]),
        ),
        send(s, c, CQP, 501, &reply_with_write(7, 32)),
    ]
}

#[test]
fn call_reply_pair_with_rdma_write_decodes_clean() {
    let a = run(&good_exchange(CLIENT, SERVER));
    assert_eq!(a.summary.flagged, 0);
    assert_eq!(
        (a.summary.calls, a.summary.replies, a.summary.v1),
        (1, 1, 2)
    );
    assert_eq!(a.summary.rdma_writes, 1);
    assert!(a.lines[0].contains(
        "192.0.2.2->192.0.2.1 qp 0x12 v1 MSG call xid 0x00000007 credits 32 write=[0xabc:8192]"
    ));
    assert!(a.lines[1].contains("RDMA_WRITE rkey 0xabc va 0x10000000 len 8192"));
    assert!(a.lines[2].contains("v1 MSG reply xid 0x00000007 credits 32"));
    assert!(a.lines[2].contains("inline 100"));
    assert_eq!(a.summary.by_kind.get("v1 MSG"), Some(&2));
}

#[test]
fn same_exchange_over_ipv6_and_pcapng() {
    let pkts = good_exchange(CLIENT6, SERVER6);
    let a = run(&pkts);
    assert_eq!(a.summary.flagged, 0);
    assert!(a.lines[0].contains("2001:db8::2->2001:db8::1 qp 0x12 v1 MSG call"));
    let ng = analyze(&pcapng(&pkts), Options::default()).unwrap();
    assert_eq!(ng.lines.len(), 3);
    assert_eq!(ng.summary.calls, 1);
    assert_eq!(ng.summary.replies, 1);
}

#[test]
fn multi_packet_send_is_reassembled_by_psn() {
    let msg = v1_msg(9, 8, ChunkSlices::NONE, MsgType::Call, 3000);
    let (a1, rest) = msg.split_at(1024);
    let (a2, a3) = rest.split_at(1024);
    let pkts = vec![
        pkt(CLIENT, SERVER, ib(0x00, SQP, 10, &[], a1)),
        pkt(CLIENT, SERVER, ib(0x01, SQP, 11, &[], a2)),
        pkt(CLIENT, SERVER, ib(0x02, SQP, 12, &[], a3)),
    ];
    let a = run(&pkts);
    assert_eq!(a.summary.flagged, 0);
    assert_eq!(a.summary.calls, 1);
    assert!(a.lines[0].contains("(3 packets)"));
    assert!(a.lines[0].contains(&format!("inline 3000 len {}", msg.len())));

    // The middle packet lost: the Send is flagged, not decoded as garbage.
    let lost = vec![
        pkt(CLIENT, SERVER, ib(0x00, SQP, 10, &[], a1)),
        pkt(CLIENT, SERVER, ib(0x02, SQP, 12, &[], a3)),
    ];
    let a = run(&lost);
    assert!(flagged_with(&a, "Send missing packets"));
    assert_eq!(a.summary.calls, 0);

    // A retransmitted Send-only is counted once.
    let dup = vec![
        send(CLIENT, SERVER, SQP, 5, &msg[..]),
        send(CLIENT, SERVER, SQP, 5, &msg[..]),
    ];
    let a = run(&dup);
    assert_eq!((a.summary.calls, a.summary.retransmits), (1, 1));
}

#[test]
fn truncated_packet_is_flagged() {
    // Cut inside the BTH.
    let mut p = send(CLIENT, SERVER, SQP, 1, &call_with_write(3));
    p.caplen = Some(14 + 20 + 8 + 6);
    let a = run(&[p]);
    assert!(flagged_with(
        &a,
        "truncated by the capture inside its headers"
    ));
    // Cut inside the RPC-over-RDMA header.
    let mut p = send(CLIENT, SERVER, SQP, 1, &call_with_write(3));
    p.caplen = Some(14 + 20 + 8 + 12 + 20);
    let a = run(&[p]);
    assert!(flagged_with(&a, "capture truncated"));
    // Cut after the header and the RPC prefix: decoded, not flagged.
    let mut p = send(CLIENT, SERVER, SQP, 1, &call_with_write(3));
    // Header: 16 fixed, 4 empty Read list, 28 Write list, 4 no Reply chunk.
    p.caplen = Some(14 + 20 + 8 + 12 + 52 + 8);
    let a = run(&[p]);
    assert_eq!(a.summary.flagged, 0);
    assert!(a.lines[0].contains("(captured"));
}

#[test]
fn cut_capture_judges_positions_at_the_wire_length() {
    // A Read chunk inserted at 1000 of a 1200-byte inline payload, of
    // which the capture kept the first 100 bytes: decoded, not flagged.
    let reads = [ReadSegment {
        position: 1000,
        segment: Segment {
            handle: 0x55,
            length: 65536,
            offset: 0x4000,
        },
    }];
    let lists = ChunkSlices {
        reads: &reads,
        ..ChunkSlices::NONE
    };
    let m = v1_msg(8, 8, lists, MsgType::Call, 1200);
    let mut p = send(CLIENT, SERVER, SQP, 1, &m);
    p.caplen = Some(14 + 20 + 8 + 12 + 100);
    let a = run(&[p]);
    assert_eq!(a.summary.flagged, 0);
    assert!(a.lines[0].contains("read=[pos 1000 0x55:65536]"));
    // At 1300 the chunk lies beyond the payload: still caught.
    let reads = [ReadSegment {
        position: 1300,
        ..reads[0]
    }];
    let lists = ChunkSlices {
        reads: &reads,
        ..ChunkSlices::NONE
    };
    let m = v1_msg(8, 8, lists, MsgType::Call, 1200);
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &m)]);
    assert!(flagged_with(&a, "PositionBeyondPayload"));
}

#[test]
fn opcodes_not_followed_are_counted_not_flagged() {
    // A RoCEv2 CNP (opcode 0x81) and a UC Send.
    let a = run(&[
        pkt(CLIENT, SERVER, ib(0x81, SQP, 1, &[0; 16], &[])),
        pkt(CLIENT, SERVER, ib(0x24, SQP, 1, &[], &[0; 8])),
    ]);
    assert_eq!((a.summary.flagged, a.summary.other_opcodes), (0, 2));
}

#[test]
fn truncated_file_is_an_error() {
    let f = pcap(&good_exchange(CLIENT, SERVER));
    assert!(analyze(&f[..f.len() - 3], Options::default()).is_err());
    assert!(analyze(b"not a capture file", Options::default()).is_err());
}

#[test]
fn malformed_header_is_flagged() {
    // A Read list discriminator of 2: the chunk list does not parse.
    let mut m = v1_msg(4, 8, ChunkSlices::NONE, MsgType::Call, 40);
    m[16..20].copy_from_slice(&2u32.to_be_bytes());
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &m)]);
    assert!(flagged_with(&a, "malformed header: BadDiscriminator"));
    // RDMA_MSG whose RPC XID is not rdma_xid.
    let mut m = v1_msg(4, 8, ChunkSlices::NONE, MsgType::Call, 40);
    m[28..32].copy_from_slice(&5u32.to_be_bytes());
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &m)]);
    assert!(flagged_with(&a, "XidMismatch"));
    // A version nobody defined.
    let mut m = v1_msg(4, 8, ChunkSlices::NONE, MsgType::Call, 40);
    m[4..8].copy_from_slice(&3u32.to_be_bytes());
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &m)]);
    assert!(flagged_with(&a, "unknown RPC-over-RDMA version 3"));
}

#[test]
fn zero_credit_reply_is_flagged() {
    let mut pkts = good_exchange(CLIENT, SERVER);
    pkts[2] = send(SERVER, CLIENT, CQP, 501, &reply_with_write(7, 0));
    let a = run(&pkts);
    assert!(flagged_with(&a, "Reply grants 0 credits"));
    assert_eq!(a.summary.flagged, 1);
}

#[test]
fn rdma_error_with_unknown_code_is_flagged() {
    let mut good = vec![0; 64];
    let n = v1::encode(
        &mut good,
        &FixedHeader {
            xid: 7,
            vers: 1,
            credits: 1,
        },
        &v1::Message::Error(v1::RdmaError::Chunk),
    )
    .unwrap();
    good.truncate(n);
    let call = send(CLIENT, SERVER, SQP, 1, &call_with_write(7));
    let a = run(&[call, send(SERVER, CLIENT, CQP, 1, &good)]);
    assert_eq!(a.summary.flagged, 0);
    assert!(a.lines[1].contains("v1 ERROR reply xid 0x00000007"));
    let mut bad = good.clone();
    bad[16..20].copy_from_slice(&9u32.to_be_bytes());
    let call = send(CLIENT, SERVER, SQP, 1, &call_with_write(7));
    let a = run(&[call, send(SERVER, CLIENT, CQP, 1, &bad)]);
    assert!(flagged_with(&a, "RDMA_ERROR with unknown code 9"));
}

#[test]
fn inline_threshold_from_the_handshake_or_the_option() {
    let big = v1_msg(11, 8, ChunkSlices::NONE, MsgType::Call, 2000);
    // No handshake, no option: nothing to hold it to.
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &big)]);
    assert_eq!(a.summary.flagged, 0);
    let a = run_with(
        &[send(CLIENT, SERVER, SQP, 1, &big)],
        Options {
            inline: Some(1024),
            ..Options::default()
        },
    );
    assert!(flagged_with(&a, "exceeds the 1024 byte inline threshold"));
    // The server's REP offers 1 KiB receives.
    let small = PrivateData {
        recv_size: 1024,
        ..PVT4K
    };
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, small);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &big));
    let a = run(&pkts);
    assert_eq!(a.summary.cm, 2);
    assert!(a.lines[0].contains("CM REQ qp 0x11 rpcrdma private data: send 4096 recv 4096"));
    assert!(flagged_with(
        &a,
        "exceeds the 1024 byte inline threshold into 192.0.2.1"
    ));
    // 4 KiB both ways: fine.
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &big));
    assert_eq!(run(&pkts).summary.flagged, 0);
}

#[test]
fn write_to_an_unadvertised_rkey_is_flagged_once_the_connection_is_known() {
    let mut pkts = good_exchange(CLIENT, SERVER);
    pkts[1] = pkt(
        SERVER,
        CLIENT,
        ib(0x0a, CQP, 500, &reth(0x1000_0000, 0xbad, 512), &[0; 64]),
    );
    // Mid-connection capture: counted as unverified, not flagged.
    let a = run(&pkts);
    assert_eq!((a.summary.flagged, a.summary.unverified), (0, 1));
    // With the handshake, or --strict: flagged.
    let mut with_cm = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    with_cm.extend(pkts);
    let a = run(&with_cm);
    assert!(flagged_with(&a, "RDMA_WRITE to rkey 0xbad"));
    // Past the end of the advertised segment.
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    pkts.extend(good_exchange(CLIENT, SERVER));
    pkts[3] = pkt(
        SERVER,
        CLIENT,
        ib(0x0a, CQP, 500, &reth(0x1000_1000, 0xabc, 8192), &[0; 64]),
    );
    assert!(flagged_with(&run(&pkts), "RDMA_WRITE to rkey 0xabc"));
    // A Read request must target a Read chunk.
    let reads = [ReadSegment {
        position: 0,
        segment: Segment {
            handle: 0x77,
            length: 4096,
            offset: 0x2000,
        },
    }];
    let long_call = v1_nomsg(
        12,
        8,
        ChunkSlices {
            reads: &reads,
            ..ChunkSlices::NONE
        },
    );
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &long_call));
    pkts.push(pkt(
        SERVER,
        CLIENT,
        ib(0x0c, CQP, 9, &reth(0x2000, 0x77, 4096), &[]),
    ));
    pkts.push(pkt(
        SERVER,
        CLIENT,
        ib(0x0c, CQP, 10, &reth(0x2000, 0x78, 4096), &[]),
    ));
    let a = run(&pkts);
    assert!(a.lines[2].contains("v1 NOMSG call xid 0x0000000c credits 8 read=[pos 0 0x77:4096]"));
    assert_eq!(a.summary.rdma_reads, 2);
    assert_eq!(a.summary.flagged, 1);
    assert!(flagged_with(&a, "RDMA_READ to rkey 0x78"));
}

#[test]
fn reply_without_call_is_flagged_when_the_capture_holds_the_connection() {
    let reply = send(SERVER, CLIENT, CQP, 1, &reply_with_write(0x42, 8));
    let a = run(&[reply]);
    assert_eq!((a.summary.flagged, a.summary.unverified), (0, 1));
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    pkts.push(send(SERVER, CLIENT, CQP, 1, &reply_with_write(0x42, 8)));
    assert!(flagged_with(
        &run(&pkts),
        "Reply's XID 0x00000042 matches no Call"
    ));
    let a = run_with(
        &[send(SERVER, CLIENT, CQP, 1, &reply_with_write(0x42, 8))],
        Options {
            strict: true,
            ..Options::default()
        },
    );
    assert!(flagged_with(&a, "matches no Call"));
}

#[test]
fn calls_beyond_the_granted_credits_are_flagged() {
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    // One Call before the first Reply; then two with two credits: fine.
    pkts.push(send(CLIENT, SERVER, SQP, 1, &call_with_write(1)));
    pkts.push(send(SERVER, CLIENT, CQP, 1, &reply_with_write(1, 2)));
    pkts.push(send(CLIENT, SERVER, SQP, 2, &call_with_write(2)));
    pkts.push(send(CLIENT, SERVER, SQP, 3, &call_with_write(3)));
    assert_eq!(run(&pkts).summary.flagged, 0);
    pkts.push(send(CLIENT, SERVER, SQP, 4, &call_with_write(4)));
    assert!(flagged_with(
        &run(&pkts),
        "3 Calls outstanding, 2 credits granted"
    ));
}

#[test]
fn version_two_and_send_with_invalidate() {
    let writes: &[&[Segment]] = &[&[WSEG]];
    let lists = ChunkSlices {
        writes,
        ..ChunkSlices::NONE
    };
    let call = v2_msg(21, 16, lists, MsgType::Call, 0xabc);
    let reply = v2_msg(21, 16, lists, MsgType::Reply, 0xabc);
    let swi = |rkey: u32| {
        pkt(
            SERVER,
            CLIENT,
            ib(0x17, CQP, 2, &rkey.to_be_bytes(), &reply),
        )
    };
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &call), swi(0xabc)]);
    assert_eq!(a.summary.flagged, 0);
    assert_eq!((a.summary.v2, a.summary.v1), (2, 0));
    assert!(a.lines[0]
        .contains("v2 MSG call xid 0x00000015 credits 16 write=[0xabc:8192] inv_handle 0xabc"));
    assert!(a.lines[1].contains("send-invalidate 0xabc"));
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &call), swi(0xdef)]);
    assert!(flagged_with(&a, "the Call's rdma_inv_handle is 0xabc"));
    let no_inv = v2_msg(21, 16, lists, MsgType::Call, 0);
    let a = run(&[send(CLIENT, SERVER, SQP, 1, &no_inv), swi(0xabc)]);
    assert!(flagged_with(&a, "rdma_inv_handle is zero"));
    // A v2 direction that contradicts the RPC message is malformed.
    let mut bad = call.clone();
    bad[16..20].copy_from_slice(&1u32.to_be_bytes());
    assert!(flagged_with(
        &run(&[send(CLIENT, SERVER, SQP, 1, &bad)]),
        "DirectionMismatch"
    ));
}

#[test]
fn binary_exit_status_and_summary() {
    let dir = std::env::temp_dir().join(format!("rdma-wire-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.pcap");
    std::fs::write(&good, pcap(&good_exchange(CLIENT, SERVER))).unwrap();
    let mut bad_pkts = good_exchange(CLIENT, SERVER);
    bad_pkts[2] = send(SERVER, CLIENT, CQP, 501, &reply_with_write(7, 0));
    let bad = dir.join("bad.pcap");
    std::fs::write(&bad, pcap(&bad_pkts)).unwrap();
    let exe = env!("CARGO_BIN_EXE_rdma-wire");
    let out = std::process::Command::new(exe)
        .arg("--summary")
        .arg(&good)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("summary: frames 3 messages 2 v1 2 v2 0 calls 1 replies 1 rdma_writes 1"));
    assert!(text.contains("flagged 0"));
    assert!(text.contains("[v1 MSG] 2"));
    let out = std::process::Command::new(exe)
        .arg("--summary")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("flagged 1"));
    let out = std::process::Command::new(exe)
        .arg(dir.join("missing.pcap"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_prefix_or_corruption_of_a_capture_panics() {
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    pkts.extend(good_exchange(CLIENT6, SERVER6));
    pkts.extend(good_exchange(CLIENT, SERVER));
    let f = pcap(&pkts);
    for n in 0..f.len() {
        let _ = analyze(&f[..n], Options::default());
    }
    // Every byte flipped in turn (a crude mutation pass over the headers).
    let mut g = f.clone();
    for i in 24..g.len() {
        g[i] ^= 0xff;
        let _ = analyze(&g, Options::default());
        g[i] ^= 0xff;
    }
    let ng = pcapng(&pkts);
    for n in 0..ng.len() {
        let _ = analyze(&ng[..n], Options::default());
    }
}

/// A real capture: matrix-rs-rs's (rpcrdma_rs client and server, rxe)
/// whole NFSv4.2 connection, snapshots of 1024 bytes.
const REAL: &[u8] = include_bytes!("data/matrix-rs-rs-mount-v4.2.pcap");

#[test]
fn real_rust_to_rust_connection_decodes_clean() {
    let a = analyze(REAL, Options::default()).unwrap();
    let s = &a.summary;
    assert_eq!(s.flagged, 0, "{:#?}", a.lines);
    assert_eq!((s.cm, s.calls, s.replies, s.v1, s.v2), (2, 26, 26, 52, 0));
    assert_eq!((s.rdma_reads, s.rdma_writes, s.unverified), (1, 3, 0));
    assert!(a.lines[0]
        .contains("CM REQ qp 0x13 rpcrdma private data: send 4096 recv 4096 remote-invalidate"));
    assert!(a
        .lines
        .iter()
        .any(|l| l.contains("RDMA_READ rkey 0xd0611 va 0xff110000018dd000 len 65536")));
    assert!(a
        .lines
        .iter()
        .any(|l| l.contains("send-invalidate 0xd0613")));
}

#[test]
fn real_connection_with_one_byte_changed_is_flagged() {
    // The first Reply's rdma_credit (Ethernet, IPv4, UDP, BTH, then the
    // header's third word) set to zero.
    let mut f = REAL.to_vec();
    let frames = rdma_wire::pcap::frames(REAL).unwrap();
    let reply = frames
        .iter()
        .position(|fr| {
            fr.data.len() > 80 && fr.data[26..30] == [192, 0, 2, 1] && fr.data[42] == 0x04
        })
        .unwrap();
    let offset = frames[reply].data.as_ptr() as usize - REAL.as_ptr() as usize;
    let credits = offset + 14 + 20 + 8 + 12 + 8;
    f[credits..credits + 4].copy_from_slice(&[0; 4]);
    let a = analyze(&f, Options::default()).unwrap();
    assert_eq!(a.summary.flagged, 1);
    assert!(flagged_with(&a, "Reply grants 0 credits"));
}

proptest::proptest! {
    /// Any bytes after the UDP header of a RoCEv2 packet, any number of
    /// such packets, either direction: lines, never a panic.
    #[test]
    fn arbitrary_roce_payloads_never_panic(
        payloads in proptest::collection::vec(
            (proptest::collection::vec(proptest::num::u8::ANY, 0..600), proptest::bool::ANY),
            1..12,
        )
    ) {
        let pkts: Vec<Pkt> = payloads
            .iter()
            .map(|(b, dir)| {
                let (s, d) = if *dir { (CLIENT, SERVER) } else { (SERVER, CLIENT) };
                pkt(s, d, b.clone())
            })
            .collect();
        let a = analyze(&pcap(&pkts), Options { strict: true, ..Options::default() }).unwrap();
        proptest::prop_assert_eq!(a.summary.frames, pkts.len() as u64);
    }

    /// A Send-only packet whose RPC-over-RDMA header is arbitrary words.
    #[test]
    fn arbitrary_headers_never_panic(words in proptest::collection::vec(0u32..8, 0..40)) {
        let msg: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        let _ = analyze(&pcap(&[send(CLIENT, SERVER, SQP, 1, &msg)]), Options::default()).unwrap();
    }
}

/// Version negotiation on a connection whose handshake was captured: the
/// version 2 probe fits 1024 bytes, and after ERR_VERS the client sends
/// version 1 only.
#[test]
fn version_two_probe_and_fallback() {
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    let small = v2_msg(31, 16, ChunkSlices::NONE, MsgType::Call, 0);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &small));
    let mut refusal = vec![0; 64];
    let fixed = FixedHeader {
        xid: 31,
        vers: 2,
        credits: 16,
    };
    let err = v2::RdmaError::Vers { low: 1, high: 1 };
    let n = v2::encode(&mut refusal, &fixed, &v2::Message::Error(err)).unwrap();
    refusal.truncate(n);
    pkts.push(send(SERVER, CLIENT, CQP, 1, &refusal));
    let resent = v1_msg(31, 16, ChunkSlices::NONE, MsgType::Call, 100);
    pkts.push(send(CLIENT, SERVER, SQP, 2, &resent));
    let a = run(&pkts);
    assert_eq!(a.summary.flagged, 0);
    // Version 2 again after the refusal.
    pkts.push(send(
        CLIENT,
        SERVER,
        SQP,
        3,
        &v2_msg(32, 16, ChunkSlices::NONE, MsgType::Call, 0),
    ));
    assert!(flagged_with(&run(&pkts), "a version 2 Call after ERR_VERS"));
    // A probe past 1024 bytes.
    let mut big = v2_msg(33, 16, ChunkSlices::NONE, MsgType::Call, 0);
    big.resize(1100, 0);
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, PVT4K);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &big));
    assert!(flagged_with(&run(&pkts), "version 2 probe of 1100 bytes"));
}

/// A version 2 receiver takes 4096 bytes whatever its private data says
/// (draft "Default Values"): a 3000-byte version 2 Call into a server
/// that advertised 1 KiB receives is within the threshold, a version 1
/// one is not, and more than 4096 bytes is flagged in either.
#[test]
fn v2_threshold_is_at_least_4096() {
    let small = PrivateData {
        recv_size: 1024,
        ..PVT4K
    };
    let sized = |mut m: Vec<u8>, len: usize| {
        m.resize(len, 0);
        m
    };
    let probe = v2_msg(20, 8, ChunkSlices::NONE, MsgType::Call, 0);
    let v2_call = sized(v2_msg(21, 8, ChunkSlices::NONE, MsgType::Call, 0), 3000);
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, small);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &probe));
    pkts.push(send(CLIENT, SERVER, SQP, 2, &v2_call));
    assert!(!flagged_with(&run(&pkts), "inline threshold"));
    let v2_big = sized(v2_msg(22, 8, ChunkSlices::NONE, MsgType::Call, 0), 5000);
    pkts.push(send(CLIENT, SERVER, SQP, 3, &v2_big));
    assert!(flagged_with(
        &run(&pkts),
        "5000 byte message exceeds the 4096 byte inline threshold"
    ));
    let v1_call = v1_msg(23, 8, ChunkSlices::NONE, MsgType::Call, 3000);
    let mut pkts = handshake(CLIENT, SERVER, PVT4K, small);
    pkts.push(send(CLIENT, SERVER, SQP, 1, &v1_call));
    assert!(flagged_with(
        &run(&pkts),
        "exceeds the 1024 byte inline threshold"
    ));
}
