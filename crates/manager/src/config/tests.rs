//! Configuration parsing and validation: every error names its key.

use super::*;

#[test]
fn errors_name_the_key_and_value() {
    let cases = [
        ("max_applications = 0", "max_applications"),
        ("[usage_decay]\nc = 1.5", "usage_decay.c"),
        ("[usage_decay]\nperiod_ms = 0", "usage_decay.period_ms"),
        ("[dss]\nquantum_ms = 0", "dss.quantum_ms"),
        ("control = \"sometimes\"", "sometimes"),
        (
            "[[partition]]\nname = \"a\"\nshare = 0",
            "partition[0].share",
        ),
        (
            "[[partition]]\nname = \"a\"\nsharing = \"rarely\"",
            "rarely",
        ),
        (
            "[[partition]]\nname = \"a\"\n[[partition]]\nname = \"a\"",
            "partition[1].name",
        ),
        ("[[partition]]\nname = \"a\"\ncolour = 1", "colour"),
        ("cpus = \"3-1\"", "cpus"),
        ("[bandwidth]\nquantum_ms = 0", "bandwidth.quantum_ms"),
        ("[bandwidth]\nwindow = 0", "bandwidth.window"),
        ("[bandwidth]\nvariant = \"newest\"", "newest"),
        (
            "[bandwidth]\ncapacity_gbps = -1.0",
            "bandwidth.capacity_gbps",
        ),
        ("[bandwidth]\nsources = [\"pmu\"]", "bandwidth.sources[0]"),
        ("[bandwidth]\nquantum = 5", "quantum"),
        ("handover_us = 100001", "handover_us"),
        ("handover_us = -1", "handover_us"),
        ("min_target = 2", "min_target"),
        ("min_target = -1", "min_target"),
        ("[[cgroup_rule]]\npreset = \"pbs\"", "cgroup_rule[0].preset"),
        ("[[cgroup_rule]]\nmatch = \"(\"", "cgroup_rule[0].match"),
        ("[[cgroup_rule]]\npreset = \"slurm\"\nlimit = 1", "limit"),
    ];
    for (text, key) in cases {
        let e = Config::from_toml_str(text).unwrap_err().to_string();
        assert!(e.contains(key), "{text:?} -> {e}");
    }
    // 0 turns the hand-over off; the longest accepted is 100 ms.
    for us in [0, MAX_HANDOVER_US] {
        let c = Config::from_toml_str(&format!("handover_us = {us}")).unwrap();
        assert_eq!(c.handover_us, us);
    }
}

/// A name with a control character is refused at load, naming the key and the
/// character (before, it was accepted and `partita status` showed U+FFFD).
#[test]
fn control_characters_in_names_are_refused_naming_the_key() {
    let three = "[[partition]]\nname = \"a\"\n[[partition]]\nname = \"b\"\n[[partition]]\n";
    let cases = [
        (
            format!("{three}name = \"c\\td\""),
            "partition[2].name",
            "U+0009",
        ),
        (
            format!("{three}name = 'c\td'"),
            "partition[2].name",
            "U+0009",
        ),
        (
            "[[partition]]\nname = \"x\\n\"".to_string(),
            "partition[0].name",
            "U+000A",
        ),
        (
            "[[partition]]\nname = \"\\u001b[31m\"".to_string(),
            "partition[0].name",
            "U+001B",
        ),
        (
            "[[partition]]\nname = \"x\\u0085\"".to_string(),
            "partition[0].name",
            "U+0085",
        ),
        (
            "[[partition]]\nname = \"x\"\n[partition.members]\nnames = [\"ok\", \"b\\u0007d\"]"
                .to_string(),
            "partition[0].members.names[1]",
            "U+0007",
        ),
    ];
    for (text, key, code) in cases {
        let e = Config::from_toml_str(&text).unwrap_err().to_string();
        assert!(
            e.contains(&format!("key `{key}`")) && e.contains(code),
            "{text:?} -> {e}"
        );
        assert!(e.contains("control characters are not allowed"), "{e}");
    }
    // Other Unicode is fine.
    let ok = "[[partition]]\nname = \"équipe – β\"\n[partition.members]\nnames = [\"ö\"]";
    assert!(Config::from_toml_str(ok).is_ok());
}

proptest::proptest! {
    /// Any name of 1 to 64 bytes is accepted exactly when it has no control character.
    #[test]
    fn names_are_accepted_exactly_without_control_characters(name in "\\PC{0,6}\\p{Cc}?\\PC{0,6}") {
        proptest::prop_assume!(!name.is_empty() && name.len() <= partita_protocol::wire::MAX_NAME);
        let mut c = Config::default();
        c.partitions.push(PartitionConfig::named(&name));
        let r = c.validate();
        proptest::prop_assert_eq!(r.is_ok(), !name.chars().any(char::is_control), "{:?}: {:?}", name, r);
    }
}

#[test]
fn bandwidth_partition_parses() {
    let c = Config::from_toml_str(
        "[bandwidth]\nvariant = \"quanta-window\"\nwindow = 3\n[[partition]]\nname = \"mem\"\npolicy = \"bandwidth\"",
    )
    .unwrap();
    assert_eq!(c.bandwidth.variant, BandwidthVariant::QuantaWindow);
    assert_eq!((c.bandwidth.window, c.bandwidth.quantum_ms), (3, 200));
    assert_eq!(c.partition_list()[1].policy, PolicyKind::Bandwidth);
}

#[test]
fn empty_file_is_the_defaults() {
    assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
}

#[test]
fn default_partition_can_be_overridden() {
    let c = Config::from_toml_str(
        "[[partition]]\nname = \"default\"\nshare = 3\npolicy = \"dss\"\n[[partition]]\nname = \"b\"\ncpus = 1\nsharing = \"never\"",
    )
    .unwrap();
    let ps = c.partition_list();
    assert_eq!(ps.len(), 2);
    assert_eq!((ps[0].share, ps[0].policy), (3, PolicyKind::Dss));
    assert_eq!(ps[1].cpus, Some(1));
}
