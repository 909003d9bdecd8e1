//! Plugins in OCI registries, as wasm OCI artifacts in the layout wasm-pkg-tools (`wkg oci push`) publishes: a
//! manifest with one layer of media type `application/wasm` (the older `application/vnd.wasm.content.layer.v1+wasm`
//! is read too) and a config of type `application/vnd.wasm.config.v0+json`. Through `oci-client`; plain HTTP only
//! for a registry on loopback, anonymous access only.

use std::str::FromStr;

use anyhow::{Context, bail};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::Digest;

/// The layer media type `wkg` writes.
pub const WASM_LAYER: &str = "application/wasm";
/// The config media type `wkg` writes.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";

/// A component pulled from a registry.
pub struct Pulled {
    /// The component.
    pub bytes: Vec<u8>,
    /// The manifest's digest (`sha256:…`): what a tag resolved to.
    pub manifest_digest: String,
}

/// `oci://HOST/REPO:TAG` or `oci://HOST/REPO@sha256:…` as a reference, and whether its registry is on loopback.
fn parse(source: &str) -> anyhow::Result<(Reference, bool)> {
    let rest = source
        .strip_prefix("oci://")
        .with_context(|| format!("{source} is not oci://HOST/REPO:TAG"))?;
    let reference =
        Reference::from_str(rest).with_context(|| format!("{source} is not oci://HOST/REPO:TAG"))?;
    let host = reference.registry();
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let loopback = name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    Ok((reference, loopback))
}

fn client(reference: &Reference, loopback: bool) -> Client {
    // TLS through rustls with ring: installed once per process (a second install is refused, harmlessly).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let protocol = if loopback {
        ClientProtocol::HttpsExcept(vec![reference.registry().to_owned()])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        ..Default::default()
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Pull the component at `source`; its layer is checked against the manifest's digest.
pub fn pull(source: &str) -> anyhow::Result<Pulled> {
    let (reference, loopback) = parse(source)?;
    let client = client(&reference, loopback);
    let accepted = vec![WASM_LAYER, oci_client::manifest::WASM_LAYER_MEDIA_TYPE];
    let image = runtime()?
        .block_on(client.pull(&reference, &RegistryAuth::Anonymous, accepted))
        .with_context(|| format!("cannot pull {source}"))?;
    let [layer] = image.layers.as_slice() else {
        bail!(
            "{source} has {} wasm layers; a plugin is one component (one layer of type {WASM_LAYER})",
            image.layers.len()
        );
    };
    let expected = image
        .manifest
        .as_ref()
        .and_then(|m| m.layers.first())
        .map(|d| d.digest.clone())
        .with_context(|| format!("{source}: the registry sent no manifest"))?;
    let actual = format!(
        "sha256:{}",
        toolwright::identity::hex(&sha2::Sha256::digest(&layer.data).into())
    );
    if actual != expected {
        bail!("{source}: the layer's digest is {actual}, but the manifest says {expected}");
    }
    Ok(Pulled {
        bytes: layer.data.to_vec(),
        manifest_digest: image.digest.unwrap_or_default(),
    })
}

/// Push `bytes` (a component) to `target` as a wasm OCI artifact: the manifest's digest.
pub fn push(bytes: &[u8], target: &str) -> anyhow::Result<String> {
    let (reference, loopback) = parse(target)?;
    let client = client(&reference, loopback);
    let layer = ImageLayer::new(bytes.to_vec(), WASM_LAYER.to_owned(), None);
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.sha256_digest()],
    });
    let config = Config::new(serde_json::to_vec(&config)?, WASM_CONFIG.to_owned(), None);
    let runtime = runtime()?;
    runtime
        .block_on(client.push(&reference, &[layer], config, &RegistryAuth::Anonymous, None))
        .with_context(|| format!("cannot push to {target}"))?;
    let digest = runtime
        .block_on(client.fetch_manifest_digest(&reference, &RegistryAuth::Anonymous))
        .with_context(|| format!("cannot read back {target}"))?;
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_registries_may_be_plain_http() {
        for (source, loopback) in [
            ("oci://127.0.0.1:5000/tools/todos:0.1.0", true),
            ("oci://localhost:5000/tools/todos:0.1.0", true),
            ("oci://ghcr.io/acme/todos:0.1.0", false),
            ("oci://10.0.0.1:5000/acme/todos:1", false),
        ] {
            assert_eq!(parse(source).unwrap().1, loopback, "{source}");
        }
        let (reference, _) = parse(&format!("oci://127.0.0.1:5000/t/x@sha256:{}", "ab".repeat(32))).unwrap();
        assert_eq!(
            reference.digest(),
            Some(format!("sha256:{}", "ab".repeat(32)).as_str())
        );
        assert!(parse("https://ghcr.io/x").is_err());
        // The reference grammar has no IPv6 literals: `[::1]` is refused as a reference, not trusted as loopback.
        assert!(parse("oci://[::1]:5000/tools/todos:0.1.0").is_err());
    }
}
