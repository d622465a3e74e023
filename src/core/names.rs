//! Kubernetes object names, checked before they are used: a DNS-1123 subdomain is how
//! Kubernetes names nodes and PriorityClasses (lowercase alphanumerics and '-' in dot-separated
//! labels, each starting and ending alphanumeric, at most 253 characters in all).

/// Whether `s` is a DNS-1123 subdomain.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_subdomains() {
        // (name, valid) - by the Kubernetes rule.
        for (name, valid) in [
            ("prewarm-balloon", true),
            ("team-a.spare", true),
            ("ip-10-0-1-7.ec2.internal", true),
            ("", false),
            ("Prewarm_Balloon", false),
            ("-balloon", false),
            ("balloon-", false),
            ("a..b", false),
            ("nœud", false),
        ] {
            assert_eq!(is_dns1123_subdomain(name), valid, "{name:?}");
        }
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    }
}
