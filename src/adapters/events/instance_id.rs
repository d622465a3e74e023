//! Which strings are instance ids. A notice names instances by id and the drain finds each node
//! by the last segment of its `spec.providerID`, so anything else (a node name such as
//! `fargate-ip-192-168-1-1.ec2.internal`, an ARN, text in another script) must be refused before
//! it is looked up.

pub use crate::config::InstanceIdRule;

/// A DNS-1123 subdomain is at most 253 characters; `kwok-` leaves 248.
const KWOK_MAX: usize = 253;

/// `Ok` when `id` is an instance id under `rule`; otherwise why not, naming the value.
pub fn check(id: &str, rule: InstanceIdRule) -> Result<(), String> {
    if is_ec2(id) || (rule == InstanceIdRule::Ec2OrKwok && is_kwok(id)) {
        return Ok(());
    }
    let shown: String = id.chars().take(80).collect();
    let why = if !id.is_ascii() {
        "has characters outside ASCII"
    } else if id.starts_with("i-") {
        "has not 8 or 17 lowercase hexadecimal digits after i-"
    } else {
        "does not start with i-"
    };
    Err(format!(
        "{shown:?} is not an EC2 instance id: it {why} (the form is i- and 8 or 17 lowercase hex digits){}",
        if rule == InstanceIdRule::Ec2OrKwok {
            ", nor a kwok node name"
        } else {
            ""
        }
    ))
}

/// Whether `value` is meant as an instance id (a Health event also names volumes, hosts, ARNs).
pub fn looks_like_instance(value: &str, rule: InstanceIdRule) -> bool {
    value.starts_with("i-") || (rule == InstanceIdRule::Ec2OrKwok && value.starts_with("kwok-"))
}

fn is_ec2(id: &str) -> bool {
    is_ec2_resource_id(id, "i-")
}

/// Whether `id` is an EC2 resource id of the type `prefix` names (`i-`, `cr-`): the prefix and 8
/// or 17 lowercase hex digits (17 since 2016, 8 before).
pub fn is_ec2_resource_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|hex| {
        (hex.len() == 8 || hex.len() == 17)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn is_kwok(id: &str) -> bool {
    id.len() <= KWOK_MAX
        && id.strip_prefix("kwok-").is_some_and(|rest| {
            !rest.is_empty()
                && !rest.ends_with(['-', '.'])
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_ids_and_everything_else() {
        use InstanceIdRule::*;
        let cases: &[(&str, InstanceIdRule, Option<&str>)] = &[
            ("i-0123456789abcdef0", Ec2, None),
            ("i-12345678", Ec2, None),
            ("i-1234567", Ec2, Some("8 or 17")),
            ("i-123456789", Ec2, Some("8 or 17")),
            ("i-0123456789ABCDEF0", Ec2, Some("8 or 17")),
            ("i-0123456789abcdefg", Ec2, Some("8 or 17")),
            ("i-0123456789abcdef00", Ec2, Some("8 or 17")),
            ("i-", Ec2, Some("8 or 17")),
            ("", Ec2, Some("does not start with i-")),
            (
                "fargate-ip-192-168-1-1.ec2.internal",
                Ec2,
                Some("does not start with i-"),
            ),
            (
                "ip-10-0-0-1.ec2.internal",
                Ec2,
                Some("does not start with i-"),
            ),
            ("i-0123456789abcdéf", Ec2, Some("outside ASCII")),
            ("і-12345678", Ec2, Some("outside ASCII")), // Cyrillic і
            (
                "kwok-gpu-abc12-x7k2p-42",
                Ec2,
                Some("does not start with i-"),
            ),
            ("kwok-gpu-abc12-x7k2p-42", Ec2OrKwok, None),
            ("i-12345678", Ec2OrKwok, None),
            ("kwok-", Ec2OrKwok, Some("nor a kwok node name")),
            ("kwok-Gpu", Ec2OrKwok, Some("nor a kwok node name")),
            ("kwok-gpu-", Ec2OrKwok, Some("nor a kwok node name")),
            ("kwok-gpu/x", Ec2OrKwok, Some("nor a kwok node name")),
        ];
        for (id, rule, err) in cases {
            match (check(id, *rule), err) {
                (Ok(()), None) => {}
                (Err(e), Some(needle)) => assert!(e.contains(needle), "{id}: {e}"),
                (got, want) => panic!("{id} under {rule:?}: got {got:?}, want {want:?}"),
            }
        }
        let long = format!("kwok-{}", "a".repeat(249));
        assert!(check(&long, Ec2OrKwok).is_err());
        assert!(check(&long[..253], Ec2OrKwok).is_ok());
    }
}
