//! Bindings for `haptic:template@0.4.0`: 0.3.0 plus the `agent` import
//! (where HAProxy reaches the agent's SPOP listener).

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use crate::library::checks::Malformed;
use crate::library::store::{GuestLogLevel, StoreState};
use crate::library::types;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/haptic-template@0.4.0",
        world: "template-library",
    });
}

use bindings::haptic::template::types as wit;

/// The contract version these bindings were generated from.
pub(super) const VERSION: semver::Version = semver::Version::new(0, 4, 0);

common_bindings!();

impl bindings::haptic::template::tls::Host for StoreState {
    fn check_certificate(
        &mut self,
        certificate_pem: String,
        private_key_pem: String,
    ) -> Result<bindings::haptic::template::tls::CertificateInfo, String> {
        crate::tls::check_certificate(&certificate_pem, &private_key_pem, crate::tls::unix_now())
            .map(|info| bindings::haptic::template::tls::CertificateInfo {
                dns_names: info.dns_names,
                not_before: info.not_before,
                not_after: info.not_after,
            })
            // The contract carries the sentence.
            .map_err(|error| error.to_string())
    }

    fn default_certificate(&mut self) -> String {
        self.default_certificate_pem().expose().to_owned()
    }
}

impl bindings::haptic::template::crypt::Host for StoreState {
    fn check_password_hash(
        &mut self,
        hash: String,
    ) -> Result<bindings::haptic::template::crypt::PasswordHashInfo, String> {
        crate::crypt::check_password_hash(&hash)
            .map(
                |scheme| bindings::haptic::template::crypt::PasswordHashInfo {
                    scheme: scheme.name().to_owned(),
                    weak: scheme.is_weak(),
                },
            )
            .map_err(|error| error.to_string())
    }
}

impl bindings::haptic::template::agent::Host for StoreState {
    fn spoa_address(&mut self) -> String {
        StoreState::spoa_address(self).to_owned()
    }
}

fn plan_from_wit(plan: wit::Plan) -> types::Plan {
    types::Plan {
        watches: plan
            .watches
            .into_iter()
            .map(|watch| types::Watch {
                name: watch.name,
                api_version: watch.api_version,
                kind: watch.kind,
                namespace: watch.namespace,
                label_selector: watch.label_selector,
                field_selector: watch.field_selector,
                ignore_fields: watch.ignore_fields,
            })
            .collect(),
        patches_status_of: plan.patches_status_of,
        applies: plan.applies,
    }
}

fn section_secret(section: &wit::Section) -> bool {
    section.secret
}

fn snippet_secret(snippet: &wit::Snippet) -> bool {
    snippet.secret
}

fn item_from_wit(item: wit::Item) -> Result<types::Item, Malformed> {
    Ok(match item {
        wit::Item::Section(section) => section_from_wit(section),
        wit::Item::Snippet(snippet) => snippet_from_wit(snippet),
        wit::Item::File(file) => types::Item::File(Arc::new(types::AuxFile::new(
            file.path,
            file.content,
            file.secret,
        ))),
        wit::Item::StatusPatch(patch) => patch_from_wit(patch)?,
        wit::Item::Warning(warning) => types::Item::Warning(Arc::new(types::Warning {
            object: warning.object.map(key_from_wit),
            reason: warning.reason,
            message: warning.message,
        })),
        wit::Item::OwnedObject(object) => types::Item::OwnedObject(Arc::new(types::OwnedObject {
            owner: key_from_wit(object.owner),
            api_version: object.api_version,
            kind: object.kind,
            name: object.name,
            manifest: object.manifest,
        })),
    })
}
