//! The EKS bearer token: `k8s-aws-v1.` + unpadded base64url of a presigned STS
//! `GetCallerIdentity` URL whose signature covers the header `x-k8s-aws-id: <cluster>`, the
//! aws-iam-authenticator convention that EKS accepts. The URL is signed with
//! `X-Amz-Expires=60` as that convention does; EKS honours a token for 15 minutes from its
//! signing time, so prewarm reuses one across warm invocations until a minute before that.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::error::{Error, Result};

pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// The header whose signature binds a token to one cluster.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// How long EKS accepts a token after signing.
pub const TOKEN_VALIDITY_S: f64 = 900.0;
/// A token is replaced this long before it would expire.
pub const REFRESH_MARGIN_S: f64 = 60.0;
/// `X-Amz-Expires` of the presigned URL (aws-iam-authenticator's value).
pub const PRESIGN_EXPIRES_S: u64 = 60;

/// Whether a token signed at `issued_at` may still be used at `now` (Unix seconds).
pub fn is_fresh(issued_at: f64, now: f64) -> bool {
    // A clock that went backwards means the age is unknown: make a new token.
    now >= issued_at && now < issued_at + TOKEN_VALIDITY_S - REFRESH_MARGIN_S
}

fn sign_error(message: impl std::fmt::Display) -> Error {
    Error::aws("sts", "presign GetCallerIdentity", message, false)
}

/// The DNS suffix of the AWS partition a region belongs to: what CloudFormation's
/// `AWS::URLSuffix` gives the template. From the partitions table the AWS SDKs embed
/// (aws-sdk-eks 1.160, `endpoint_lib.rs`: each partition's `regionRegex` and `dnsSuffix`); the
/// longer prefixes come first because `us-iso-` is also a prefix of nothing else but `us-` is.
pub fn dns_suffix(region: &str) -> &'static str {
    const PARTITIONS: [(&str, &str); 6] = [
        ("cn-", "amazonaws.com.cn"),    // aws-cn
        ("eusc-", "amazonaws.eu"),      // aws-eusc
        ("us-isob-", "sc2s.sgov.gov"),  // aws-iso-b
        ("us-isof-", "csp.hci.ic.gov"), // aws-iso-f
        ("us-iso-", "c2s.ic.gov"),      // aws-iso
        ("eu-isoe-", "cloud.adc-e.uk"), // aws-iso-e
    ];
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("amazonaws.com", |(_, suffix)| suffix) // aws, aws-us-gov
}

/// The regional STS endpoint EKS validates tokens against, in the region's partition.
pub fn sts_url(region: &str) -> String {
    format!(
        "https://sts.{region}.{}/?Action=GetCallerIdentity&Version=2011-06-15",
        dns_suffix(region)
    )
}

/// Presigns `GetCallerIdentity` for `cluster` with `credentials` at time `at`.
pub fn presigned_url(
    cluster: &str,
    region: &str,
    credentials: &Credentials,
    at: SystemTime,
) -> Result<String> {
    let base = sts_url(region);
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(PRESIGN_EXPIRES_S));
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(at)
        .settings(settings)
        .build()
        .map_err(sign_error)?
        .into();
    let request = SignableRequest::new(
        "GET",
        base.as_str(),
        [(CLUSTER_ID_HEADER, cluster)].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(sign_error)?;
    let (instructions, _signature) = sign(request, &params).map_err(sign_error)?.into_parts();
    let mut url = url::Url::parse(&base).map_err(sign_error)?;
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in instructions.params() {
            query.append_pair(name, value);
        }
    }
    Ok(url.into())
}

/// The bearer token for `cluster`.
pub fn token(
    cluster: &str,
    region: &str,
    credentials: &Credentials,
    at: SystemTime,
) -> Result<String> {
    let url = presigned_url(cluster, region, credentials, at)?;
    Ok(format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(url)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn credentials(session: Option<&str>) -> Credentials {
        Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session.map(str::to_string),
            None,
            "test",
        )
    }

    // 2026-11-29T12:00:00Z
    fn noon() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_953_600)
    }

    fn decode(token: &str) -> url::Url {
        let body = token.strip_prefix(TOKEN_PREFIX).expect("token prefix");
        assert!(!body.contains('='), "base64 must be unpadded");
        assert!(
            !body.contains('+') && !body.contains('/'),
            "base64 must be url-safe"
        );
        let raw = URL_SAFE_NO_PAD.decode(body).expect("valid base64url");
        url::Url::parse(std::str::from_utf8(&raw).unwrap()).unwrap()
    }

    #[test]
    fn the_token_is_a_presigned_get_caller_identity_bound_to_the_cluster() {
        let t = token(
            "prewarm-test",
            "eu-west-1",
            &credentials(Some("SESSION/TOKEN+x=")),
            noon(),
        )
        .unwrap();
        let url = decode(&t);
        assert_eq!(url.scheme(), "https");
        assert_eq!(url.host_str(), Some("sts.eu-west-1.amazonaws.com"));
        assert_eq!(url.path(), "/");
        let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(q["Action"], "GetCallerIdentity");
        assert_eq!(q["Version"], "2011-06-15");
        assert_eq!(q["X-Amz-Algorithm"], "AWS4-HMAC-SHA256");
        assert_eq!(
            q["X-Amz-Credential"],
            "AKIDEXAMPLE/20261129/eu-west-1/sts/aws4_request"
        );
        assert!(q["X-Amz-Credential"].ends_with("/sts/aws4_request"));
        assert_eq!(q["X-Amz-Date"], "20261129T120000Z");
        assert_eq!(q["X-Amz-Expires"], "60");
        let signed: Vec<&str> = q["X-Amz-SignedHeaders"].split(';').collect();
        assert_eq!(signed, ["host", "x-k8s-aws-id"]);
        assert!(q["X-Amz-SignedHeaders"].contains("host;x-k8s-aws-id"));
        assert_eq!(q["X-Amz-Security-Token"], "SESSION/TOKEN+x=");
        assert_eq!(q["X-Amz-Signature"].len(), 64);
        assert!(q["X-Amz-Signature"].chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_signature_depends_on_the_cluster_and_the_time() {
        let c = credentials(None);
        let sig = |cluster: &str, at: SystemTime| {
            let url = decode(&token(cluster, "us-east-1", &c, at).unwrap());
            url.query_pairs()
                .find(|(k, _)| k == "X-Amz-Signature")
                .unwrap()
                .1
                .into_owned()
        };
        let a = sig("prewarm-test", noon());
        assert_eq!(a, sig("prewarm-test", noon()), "signing is deterministic");
        assert_ne!(a, sig("other", noon()));
        assert_ne!(a, sig("prewarm-test", noon() + Duration::from_secs(1)));
        let no_session = decode(&token("prewarm-test", "us-east-1", &c, noon()).unwrap());
        assert!(!no_session
            .query_pairs()
            .any(|(k, _)| k == "X-Amz-Security-Token"));
    }

    #[test]
    fn the_sts_host_is_in_the_regions_partition() {
        // (region, host) from the SDK partitions table, typed by hand.
        let cases = [
            ("us-east-1", "sts.us-east-1.amazonaws.com"),
            ("eu-west-1", "sts.eu-west-1.amazonaws.com"),
            ("us-gov-west-1", "sts.us-gov-west-1.amazonaws.com"),
            ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn"),
            ("cn-northwest-1", "sts.cn-northwest-1.amazonaws.com.cn"),
            ("eusc-de-east-1", "sts.eusc-de-east-1.amazonaws.eu"),
            ("us-iso-east-1", "sts.us-iso-east-1.c2s.ic.gov"),
            ("us-isob-east-1", "sts.us-isob-east-1.sc2s.sgov.gov"),
            ("us-isof-south-1", "sts.us-isof-south-1.csp.hci.ic.gov"),
            ("eu-isoe-west-1", "sts.eu-isoe-west-1.cloud.adc-e.uk"),
        ];
        let c = credentials(None);
        for (region, host) in cases {
            let url = decode(&token("prewarm-test", region, &c, noon()).unwrap());
            assert_eq!(url.host_str(), Some(host), "{region}");
            let q: HashMap<String, String> = url.query_pairs().into_owned().collect();
            assert!(
                q["X-Amz-Credential"].ends_with(&format!("/{region}/sts/aws4_request")),
                "{region}"
            );
        }
    }

    #[test]
    fn a_token_is_reused_until_a_minute_before_its_fifteen_minutes_end() {
        let issued = 1_000.0;
        let cases = [
            (issued, true),
            (issued + 60.0, true),
            (issued + 839.0, true),
            (issued + 840.0, false),
            (issued + 900.0, false),
            (issued - 5.0, false),
        ];
        for (now, fresh) in cases {
            assert_eq!(is_fresh(issued, now), fresh, "now={now}");
        }
    }
}
