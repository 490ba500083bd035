//! Every case of 1.36's `sharding/parser_test.go`, and more, with the
//! messages the 1.36.3 apiserver (`ShardedListAndWatch=true`, the kit in
//! `../shared/tools/kube-apiserver-1.36`) answered for them on 2026-11-29,
//! after its "invalid shard selector: " prefix.

use super::*;

const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";

/// (selector, 1.36's message after "invalid shard selector: ").
const REFUSED: &[(&str, &str)] = &[
    (
        "   ",
        "empty shard selector is not allowed; omit the parameter for unfiltered lists",
    ),
    (
        "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
        r#"hexStart must have '0x' prefix, got "0000000000000000""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '8000000000000000')",
        r#"hexEnd must have '0x' prefix, got "8000000000000000""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
        "hexStart: hex value is required after '0x'",
    ),
    (
        "shardRange(object.metadata.name, '0x00', '0x80')",
        r#"unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace"#,
    ),
    (
        "shardRange(object.metadata.labels, '0x00', '0x80')",
        r#"unsupported field path "object.metadata.labels"; supported: object.metadata.uid, object.metadata.namespace"#,
    ),
    (
        "invalidFunc(object.metadata.uid, '0x00', '0x80')",
        r#"unsupported function "invalidFunc"; only shardRange() and || are allowed"#,
    ),
    (
        "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
        r#"hexStart: hex value too long (18 chars, max 17): "000000000000000000""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0g', '0x80')",
        r#"hexStart: invalid hex character "g" in "0x0g""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0', '0x8') && shardRange(object.metadata.uid, '0x8', '0xf')",
        r#"unsupported function "_&&_"; only shardRange() and || are allowed"#,
    ),
    (
        "shardRange(object.metadata.uid, 0, 8)",
        "hexStart must be a string literal, got int64",
    ),
    (
        "object.metadata.uid > '0x0'",
        r#"unsupported function "_>_"; only shardRange() and || are allowed"#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0')",
        "shardRange() requires exactly 3 arguments, got 2",
    ),
    (
        "shardRange(object.metadata.uid, hex(0), '0x8')",
        "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')",
        r#"all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
        r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0xff')",
        r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0xff" (did you mean "0x00000000000000ff"?)"#,
    ),
    (
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
        "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
    ),
    (
        "shardRange(object.metadata.uid, '0xffffffffffffffff', '0x0000000000000000')",
        "shard range start 0xffffffffffffffff must be less than end 0x0000000000000000",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000001')",
        r#"hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), got "0x10000000000000001""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'",
        "CEL parse error: Syntax error: missing ')' at '<EOF>'",
    ),
    (
        "shardRange(",
        "CEL parse error: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || object",
        "unexpected expression kind 3; expected shardRange() call or || operator",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')shardRange(",
        "CEL parse error: Syntax error: mismatched input 'shardRange' expecting <EOF>",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x800000000000000G')",
        r#"hexEnd: invalid hex character "G" in "0x800000000000000G""#,
    ),
    (
        "shardRange(object.metadata.UID, '0x0000000000000000', '0x8000000000000000')",
        r#"unsupported field path "object.metadata.UID"; supported: object.metadata.uid, object.metadata.namespace"#,
    ),
    (
        "shardRange(object.metadata.uid, '0X0000000000000000', '0x8000000000000000')",
        r#"hexStart must have '0x' prefix, got "0X0000000000000000""#,
    ),
    (
        "shardRange(object.metadata.uid, '0x000000000000000A', '0x8000000000000000')",
        r#"hexStart: invalid hex character "A" in "0x000000000000000A""#,
    ),
    (
        "shardRange(metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        r#"unsupported field path "metadata.uid"; supported: object.metadata.uid, object.metadata.namespace"#,
    ),
    (
        "shardRange(object['metadata'].uid, '0x0000000000000000', '0x8000000000000000')",
        "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 1",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', b'0x8000000000000000')",
        "hexEnd must be a string literal, got []uint8",
    ),
    (
        "1",
        "unexpected expression kind 5; expected shardRange() call or || operator",
    ),
    (
        "'",
        "CEL parse error: Syntax error: token recognition error at: '''",
    ),
    (
        "shardRange(object.metadata.uid, null, '0x8000000000000000')",
        "hexStart must be a string literal, got structpb.NullValue",
    ),
    (
        "shardRange(object.metadata.uid, true, '0x8000000000000000')",
        "hexStart must be a string literal, got bool",
    ),
    (
        "shardRange(object.metadata.uid, 1u, '0x8000000000000000')",
        "hexStart must be a string literal, got uint64",
    ),
    (
        "shardRange(object.metadata.uid, 1.5, '0x8000000000000000')",
        "hexStart must be a string literal, got float64",
    ),
    (
        "shardRange(object.metadata.uid, [1], '0x8000000000000000')",
        "hexStart must be a string literal (e.g. '0xff'), got expression kind 4",
    ),
    (
        "shardRange(object.metadata.uid, {1:2}, '0x8000000000000000')",
        "hexStart must be a string literal (e.g. '0xff'), got expression kind 6",
    ),
    (
        "shardRange(object.metadata.uid, -1, '0x8000000000000000')",
        "hexStart must be a string literal, got int64",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || ",
        "CEL parse error: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') | shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        "CEL parse error: Syntax error: token recognition error at: '| '",
    ),
    (
        "shardRange(1, '0x0000000000000000', '0x8000000000000000')",
        "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind 5",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000', '0x1')",
        "shardRange() requires exactly 3 arguments, got 4",
    ),
    (
        "shardRange()",
        "shardRange() requires exactly 3 arguments, got 0",
    ),
    (
        "shardRange",
        "unexpected expression kind 3; expected shardRange() call or || operator",
    ),
    (
        "!shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
        r#"unsupported function "!_"; only shardRange() and || are allowed"#,
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') ? 1 : 2",
        r#"unsupported function "_?_:_"; only shardRange() and || are allowed"#,
    ),
];

#[test]
fn should_refuse_what_1_36_refuses_with_its_messages() {
    for (selector, want) in REFUSED {
        let got = ShardSelector::parse(selector).expect_err(selector);
        assert_eq!(got, format!("invalid shard selector: {want}"), "{selector}");
    }
}

#[test]
fn should_accept_what_1_36_accepts_and_write_it_back_as_1_36_does() {
    let both = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";
    // (selector, canonical form) — 1.36's round-trip cases, and forms its
    // CEL parser accepts (quotes, escapes, parentheses, a member call).
    let accepted = [
        (LOW, LOW),
        (both, both),
        (
            "  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ",
            LOW,
        ),
        (
            "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')",
            LOW,
        ),
        (
            r#"shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")"#,
            LOW,
        ),
        (
            "(shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000'))",
            LOW,
        ),
        (
            "shardRange(object.metadata.uid, r'0x0000000000000000', '0x8000000000000000')",
            LOW,
        ),
        (
            r"shardRange(object.metadata.uid, '\x30x0000000000000000', '0x8000000000000000')",
            LOW,
        ),
        (
            "object.shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
            LOW,
        ),
        (
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
            "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
        ),
    ];
    for (selector, canonical) in accepted {
        let s = ShardSelector::parse(selector).unwrap_or_else(|e| panic!("{selector}: {e}"));
        assert_eq!(s.canonical(), canonical, "{selector}");
        assert_eq!(ShardSelector::parse(s.canonical()).unwrap(), s);
    }
    let three = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000005') || shardRange(object.metadata.uid, '0x0000000000000005', '0x000000000000000a') || shardRange(object.metadata.uid, '0x000000000000000a', '0x000000000000000f')";
    let s = ShardSelector::parse(three).unwrap();
    assert_eq!(s.canonical(), three);
    assert!(s.selects(0) && s.selects(9) && s.selects(14) && !s.selects(15));
}

#[test]
fn should_select_as_1_36_selected_the_kits_objects() {
    // Twenty widgets' uids, and whether 1.36 listed each for LOW.
    let recorded = [
        ("026a5438-d349-42d8-bf13-db56e82697dc", false),
        ("13c3102a-ea00-469a-bb98-a197ea4c00d0", true),
        ("159a6f40-b50d-4ff8-bb4d-122944b29637", false),
        ("19e4f099-24db-4ffd-8301-4fab37ab1b33", false),
        ("1a90b56d-b3b3-4442-9f0c-735ed331268f", true),
        ("1d0f2e6c-b101-460e-9384-9ceb075db1af", true),
        ("2c16a42f-8292-4c36-bae8-94c85454ab4a", true),
        ("41960a2d-b412-4b88-bd8a-d7b74d85c3ab", false),
        ("4964bfdf-62dd-42a5-b575-6e123b797c9f", true),
        ("752246be-0900-44ca-841c-cb0fc200f200", false),
        ("7ccf33f4-8e15-4faf-9f23-034d11c016e7", false),
        ("88d22f26-ccf5-464f-95e7-0598f7905bda", false),
        ("9680f525-1300-475e-bf77-7edb33f80180", true),
        ("ab64bfc7-fdf3-4f30-91e0-172c85ace464", false),
        ("ae87563d-8be0-41c8-9643-5e64d7c8dcdb", false),
        ("b1f7eb85-a4b9-450e-956d-3e37ffc08495", false),
        ("b6283ca6-5f91-4fb0-bf62-f6cf182866d1", true),
        ("cc5044ac-ebac-43d6-b940-de5052f77a3c", true),
        ("d3b78900-c001-4bb8-be9e-56c05381dedd", false),
        ("e7dbf982-529c-4d89-b296-dbf0b6959a79", true),
    ];
    let low = ShardSelector::parse(LOW).unwrap();
    let high = ShardSelector::parse(
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
    )
    .unwrap();
    for (uid, listed) in recorded {
        assert_eq!(low.selects(fnv1a(uid)), listed, "{uid}");
        assert_eq!(high.selects(fnv1a(uid)), !listed, "{uid}");
    }
    // FNV-1a's published values.
    assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    assert!(high.selects(u64::MAX));
}

#[test]
fn should_never_panic_on_any_input() {
    // Seeded: selectors cut and spliced from the cases above, and bytes.
    let mut rng = fastrand::Rng::with_seed(5866);
    let pieces: Vec<&str> = REFUSED.iter().map(|(s, _)| *s).chain([LOW]).collect();
    for _ in 0..20_000 {
        let a = pieces[rng.usize(..pieces.len())];
        let b = pieces[rng.usize(..pieces.len())];
        let (i, j) = (rng.usize(..=a.len()), rng.usize(..=b.len()));
        let s: String = a.chars().take(i).chain(b.chars().skip(j)).collect();
        let _ = ShardSelector::parse(&s);
        let alphabet = b"shardRange(.,'0x)|&!-[]{}\"\\ 1u";
        let noise: String = (0..rng.usize(..24))
            .map(|_| char::from(alphabet[rng.usize(..alphabet.len())]))
            .collect();
        let _ = ShardSelector::parse(&noise);
    }
}

/// A shard's buckets hold every hash it selects: an object outside them is
/// never its, so its watchers need not wake for it.
#[test]
fn should_wake_a_shard_for_the_buckets_its_ranges_reach() {
    let q = |a: &str, b: &str| {
        ShardSelector::parse(&format!("shardRange(object.metadata.uid, '{a}', '{b}')")).unwrap()
    };
    let quarter = q("0x4000000000000000", "0x8000000000000000");
    assert_eq!(quarter.buckets(), (16..32).collect::<Vec<u8>>());
    let top = q("0xc000000000000000", "0x10000000000000000");
    assert_eq!(top.buckets(), (48..64).collect::<Vec<u8>>());
    // A third: the buckets it reaches into, the shared ones included.
    let third = q("0x5555555555555555", "0xaaaaaaaaaaaaaaaa");
    assert_eq!(third.buckets(), (21..=42).collect::<Vec<u8>>());
    let mut rng = fastrand::Rng::with_seed(5866);
    for s in [quarter, top, third] {
        let buckets = s.buckets();
        for _ in 0..20_000 {
            let h = rng.u64(..);
            if s.selects(h) {
                assert!(buckets.contains(&bucket(h)), "{h:#x} in {}", s.canonical());
            }
        }
    }
}
