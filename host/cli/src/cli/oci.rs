//! Plugins in OCI registries, as wasm OCI artifacts in the layout wasm-pkg-tools (`wkg oci push`) publishes: a
//! manifest with one layer of media type `application/wasm` (the older `application/vnd.wasm.content.layer.v1+wasm`
//! is read too) and a config of type `application/vnd.wasm.config.v0+json`. Through `oci-client`; plain HTTP only
//! for a registry on loopback, anonymous access only. A pull fetches the manifest and streams the layer to a file,
//! counted against its declared size and [`MAX_LAYER_BYTES`] and hashed as it arrives.

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

/// The largest layer `pull` takes, whatever the manifest declares: a plugin is a component, not a disk image.
pub const MAX_LAYER_BYTES: u64 = 256 << 20;

/// A component pulled from a registry.
pub struct Pulled {
    /// The layer's SHA-256, lower-case hex (checked against the manifest's digest).
    pub sha256: String,
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
        // A registry that goes quiet is given up on, not waited for.
        connect_timeout: Some(std::time::Duration::from_secs(30)),
        read_timeout: Some(std::time::Duration::from_secs(60)),
        ..Default::default()
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Pull the component at `source` into `out`, streamed: the layer must be the one wasm layer of the manifest, no
/// larger than [`MAX_LAYER_BYTES`], and the bytes are counted against the size the manifest declares and hashed
/// as they arrive, so a registry that declares 1 000 bytes and sends more is stopped at byte 1 001, and one that
/// sends other bytes fails the digest. Neither the config blob nor the layer is ever held in memory.
pub fn pull(source: &str, out: &mut impl std::io::Write) -> anyhow::Result<Pulled> {
    let (reference, loopback) = parse(source)?;
    let client = client(&reference, loopback);
    let runtime = runtime()?;
    let (manifest, manifest_digest) = runtime
        .block_on(client.pull_image_manifest(&reference, &RegistryAuth::Anonymous))
        .with_context(|| format!("cannot pull {source}"))?;
    let accepted = [WASM_LAYER, oci_client::manifest::WASM_LAYER_MEDIA_TYPE];
    let [layer] = manifest.layers.as_slice() else {
        bail!(
            "{source} has {} layers; a plugin is one component (one layer of type {WASM_LAYER})",
            manifest.layers.len()
        );
    };
    if !accepted.contains(&layer.media_type.as_str()) {
        bail!(
            "{source}: its layer is of type `{}`, not {WASM_LAYER}",
            toolwright::text::escape(&layer.media_type)
        );
    }
    let declared = u64::try_from(layer.size)
        .ok()
        .filter(|size| *size <= MAX_LAYER_BYTES)
        .with_context(|| {
            format!(
                "{source}: the manifest declares a layer of {} bytes; a plugin may be at most {MAX_LAYER_BYTES} bytes",
                layer.size
            )
        })?;
    let expected = layer
        .digest
        .strip_prefix("sha256:")
        .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .with_context(|| {
            format!(
                "{source}: the layer's digest `{}` is not sha256:HEX",
                toolwright::text::escape(&layer.digest)
            )
        })?
        .to_ascii_lowercase();
    let sha256 = runtime.block_on(async {
        use futures::StreamExt as _;
        let mut blob = client
            .pull_blob_stream(&reference, layer)
            .await
            .with_context(|| format!("cannot pull {source}"))?;
        let mut hasher = sha2::Sha256::new();
        let mut received: u64 = 0;
        while let Some(chunk) = blob.stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // The client's own digest check at the end of the stream: ours below says it in our words.
                Err(_) if received == declared => break,
                Err(e) => return Err(e).with_context(|| format!("cannot pull {source}")),
            };
            received += chunk.len() as u64;
            if received > declared {
                bail!(
                    "{source}: the registry sent more than the {declared} bytes the manifest declares for the layer; \
                     the download was stopped and nothing was installed"
                );
            }
            hasher.update(&chunk);
            out.write_all(&chunk)
                .context("cannot write the layer to a temporary file")?;
        }
        if received != declared {
            bail!(
                "{source}: the registry sent {received} of the {declared} bytes the manifest declares for the layer; \
                 nothing was installed"
            );
        }
        Ok(toolwright::trust::identity::hex(&hasher.finalize().into()))
    })?;
    if sha256 != expected {
        bail!("{source}: the layer's digest is sha256:{sha256}, but the manifest says sha256:{expected}");
    }
    Ok(Pulled {
        sha256,
        manifest_digest,
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
