//! Amazon Managed Service for Prometheus: the Prometheus source with every request signed by
//! SigV4 (service `aps`). Credentials come from `aws-config`'s provider chain, resolved at
//! start-up; they are cached here until five minutes before they expire, because the default
//! chain's provider fetches anew on every call (for container or instance credentials that is a
//! network round trip per query) and the SDK's own identity cache is not available outside a
//! service client.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;

use super::prometheus::{PrometheusSource, RequestSigner};
use crate::error::Error;

/// The SigV4 service name of Amazon Managed Service for Prometheus.
pub const SERVICE: &str = "aps";

/// Refresh cached credentials this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

/// Signs AMP requests with the credentials of a provider, caching them between ticks.
pub struct ApsSigner {
    region: String,
    provider: SharedCredentialsProvider,
    cached: tokio::sync::Mutex<Option<Credentials>>,
}

impl std::fmt::Debug for ApsSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApsSigner")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl ApsSigner {
    pub fn new(region: &str, provider: SharedCredentialsProvider) -> Self {
        ApsSigner {
            region: region.to_string(),
            provider,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// Resolves credentials now, so a missing identity fails at start-up rather than on the
    /// first tick.
    pub async fn preload(&self) -> Result<(), Error> {
        self.credentials().await.map(|_| ())
    }

    async fn credentials(&self) -> Result<Credentials, Error> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref() {
            let fresh = match c.expiry() {
                None => true,
                Some(expiry) => crate::clock::system_now() + REFRESH_BEFORE_EXPIRY < expiry,
            };
            if fresh {
                return Ok(c.clone());
            }
        }
        let c = self
            .provider
            .provide_credentials()
            .await
            .map_err(|e| Error::aws(SERVICE, "load credentials", e, true))?;
        *cached = Some(c.clone());
        Ok(c)
    }
}

#[async_trait::async_trait]
impl RequestSigner for ApsSigner {
    /// The headers to add to a GET of `url`, signed now: a signature is only good for minutes
    /// after its time, so it is the time the request is sent, not the tick's.
    async fn headers_for_get(&self, url: &str) -> Result<Vec<(String, String)>, Error> {
        let credentials = self.credentials().await?;
        signed_get_headers(url, &credentials, &self.region, crate::clock::system_now())
    }
}

/// The `host`, `x-amz-date`, `authorization` (and with a session token `x-amz-security-token`)
/// headers of a GET of `url` signed at `time`. Pure: the caller supplies credentials and clock,
/// so tests can check the result for fixed inputs. `url` must already be percent-encoded.
pub fn signed_get_headers(
    url: &str,
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> Result<Vec<(String, String)>, Error> {
    let fail = |message: String| Error::Metrics {
        target: "*".into(),
        message: format!("signing the AMP request failed: {message}"),
        retryable: false,
    };
    let parsed = url::Url::parse(url).map_err(|e| fail(format!("bad URL {url:?}: {e}")))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => return Err(fail(format!("URL {url:?} has no host"))),
    };
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| fail(e.to_string()))?
        .into();
    let request = SignableRequest::new(
        "GET",
        url,
        [("host", host.as_str())].into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| fail(e.to_string()))?;
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| fail(e.to_string()))?
        .into_parts();
    let mut headers = vec![("host".to_string(), host.clone())];
    headers.extend(
        instructions
            .headers()
            .map(|(name, value)| (name.to_string(), value.to_string())),
    );
    Ok(headers)
}

/// Accepts the workspace URL as the console shows it, with or without a trailing slash or the
/// `/api/v1/query` suffix people copy from the docs.
pub fn workspace_base(workspace_url: &str) -> String {
    let u = workspace_url.trim().trim_end_matches('/');
    let u = u.strip_suffix("/api/v1/query").unwrap_or(u);
    let u = u.strip_suffix("/api/v1/query_range").unwrap_or(u);
    u.trim_end_matches('/').to_string()
}

/// The AMP source: the Prometheus source over the workspace URL with this signer.
pub fn source(workspace_url: &str, signer: Arc<ApsSigner>) -> Result<PrometheusSource, Error> {
    PrometheusSource::build(
        &workspace_base(workspace_url),
        Some(signer as Arc<dyn RequestSigner>),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1234/api/v1/query_range?query=sum%28up%29&start=1.000&end=2.000&step=1.000";

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    // 2024-05-06T07:08:09Z
    fn fixed_time() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_979_289)
    }

    #[test]
    fn the_signature_names_service_region_host_and_date() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let headers = signed_get_headers(URL, &creds, "eu-west-1", fixed_time()).unwrap();
        assert_eq!(
            header(&headers, "host"),
            Some("aps-workspaces.eu-west-1.amazonaws.com")
        );
        assert_eq!(header(&headers, "x-amz-date"), Some("20240506T070809Z"));
        assert_eq!(header(&headers, "x-amz-security-token"), None);
        let auth = header(&headers, "authorization").unwrap();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240506/eu-west-1/aps/aws4_request, "
            ),
            "{auth}"
        );
        assert!(auth.contains("SignedHeaders=host;x-amz-date, "), "{auth}");
        // Computed independently with botocore's SigV4Auth (service aps, same URL, time and
        // credentials), not with this code.
        assert!(
            auth.ends_with(
                "Signature=3559c4ef6e2bc80db395e15a14aaec6f3a1ecd37f8be6d67218a4e715859255b"
            ),
            "{auth}"
        );
    }

    #[test]
    fn a_session_token_is_sent_and_signed() {
        let creds = Credentials::new("ASIAEXAMPLE", "secret", Some("tok+en/=".into()), None, "t");
        let headers = signed_get_headers(URL, &creds, "eu-west-1", fixed_time()).unwrap();
        assert_eq!(header(&headers, "x-amz-security-token"), Some("tok+en/="));
        let auth = header(&headers, "authorization").unwrap();
        assert!(
            auth.contains("SignedHeaders=host;x-amz-date;x-amz-security-token, "),
            "{auth}"
        );
        // botocore's signature for the same inputs.
        assert!(
            auth.ends_with(
                "Signature=d841e3d2982cc59253b1e3215b055c6f5816feeeaa6e8159d465452c13ff56eb"
            ),
            "{auth}"
        );
    }

    #[test]
    fn the_signature_depends_on_query_region_and_time() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let sig = |url: &str, region: &str, t: SystemTime| {
            let h = signed_get_headers(url, &creds, region, t).unwrap();
            header(&h, "authorization").unwrap().to_string()
        };
        let base = sig(URL, "eu-west-1", fixed_time());
        assert_eq!(base, sig(URL, "eu-west-1", fixed_time()));
        assert_ne!(
            base,
            sig(&URL.replace("up", "down"), "eu-west-1", fixed_time())
        );
        assert_ne!(base, sig(URL, "us-east-1", fixed_time()));
        assert_ne!(
            base,
            sig(URL, "eu-west-1", fixed_time() + Duration::from_secs(1))
        );
    }

    #[test]
    fn a_port_is_part_of_the_host_header() {
        let creds = Credentials::new("AKIDEXAMPLE", "secret", None, None, "test");
        let h = signed_get_headers(
            "http://127.0.0.1:19090/api/v1/query_range?query=up",
            &creds,
            "us-east-1",
            fixed_time(),
        )
        .unwrap();
        assert_eq!(header(&h, "host"), Some("127.0.0.1:19090"));
    }

    #[test]
    fn workspace_urls_are_normalized() {
        let want = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1";
        for given in [
            want.to_string(),
            format!("{want}/"),
            format!("{want}/api/v1/query"),
            format!(" {want}/api/v1/query_range/ "),
        ] {
            assert_eq!(workspace_base(&given), want, "{given}");
        }
    }
}
