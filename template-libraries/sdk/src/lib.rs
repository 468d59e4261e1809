//! The guest SDK for haptic template libraries.
//!
//! A template library is a WebAssembly component that turns watched
//! Kubernetes objects and Helm-style values into HAProxy configuration,
//! auxiliary files, status patches and objects the host applies for it.
//! This crate speaks the contract `haptic:template@0.4.0`
//! (`wit/haptic-template@0.4.0`; haptic's `docs/contract.md` says what
//! each version adds): it hides the WIT bindings behind a [`Library`] trait
//! and the [`export_library!`] macro, keeps the library's view of its objects
//! (each parsed once per resourceVersion into the type its [`Watch`]
//! declares), tells it what changed, and sends the host only the output
//! items that differ from the previous render.
//!
//! A complete library that puts every Service into a map file:
//!
//! ```
//! use haptic_sdk::k8s::api::core::v1::Service;
//! use haptic_sdk::{Context, Info, Library, Output, Plan, Result, Values, Watch};
//! use serde::Deserialize;
//!
//! #[derive(Default)]
//! struct ServiceMap {
//!     values: MyValues,
//! }
//!
//! #[derive(Default, Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! struct MyValues {
//!     file_name: String,
//! }
//!
//! impl Library for ServiceMap {
//!     fn info(&self) -> Info {
//!         Info::new("service-map", "0.1.0")
//!             .order(500)
//!             .defaults(serde_json::json!({ "fileName": "services.map" }))
//!     }
//!
//!     fn plan(&mut self, values: &Values) -> Result<Plan> {
//!         // `values` holds every library's values; `get` reads this one's
//!         // (`templateLibraries.serviceMap`), defaults merged.
//!         self.values = values.get()?;
//!         Ok(Plan::default().watch(Watch::new("services", "v1", "Service").parse_as::<Service>()))
//!     }
//!
//!     fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
//!         let mut map = String::new();
//!         for service in ctx.objects::<Service>("services")? {
//!             let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
//!             let key = format!("{}/{}", service.key.namespace, service.key.name);
//!             if let Some(line) = ip.and_then(|ip| haptic_sdk::names::map_line(&key, ip)) {
//!                 map.push_str(&line);
//!             }
//!         }
//!         // The SDK compares with the previous render and sends only changes.
//!         out.file(format!("maps/{}", self.values.file_name), map)
//!     }
//! }
//!
//! haptic_sdk::export_library!(ServiceMap);
//! # fn main() {
//! #     let mut h = haptic_sdk::testing::Harness::<ServiceMap>::new(serde_json::json!({})).unwrap();
//! #     h.apply("services", &serde_json::json!({"metadata": {"namespace": "default", "name": "web"}, "spec": {"clusterIP": "10.0.0.1"}}));
//! #     h.render().unwrap();
//! #     assert_eq!(h.file("maps/services.map"), Some("default/web 10.0.0.1\n"));
//! # }
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release` and a
//! `[lib] crate-type = ["cdylib", "rlib"]`; the `.wasm` is the component.
//! [`testing::Harness`] runs the same library natively in unit tests.
//!
//! Where your lines land among the bundled libraries' and what they provide
//! to build on (`frontend http`, `txn.haptic_host`, ...) is in
//! [`extending`]: slots, priorities and the public names, as a contract.
//! `haptic new <dir>` starts a project of your own that builds and passes
//! `haptic test` as written (`--lang python` for one on the Python SDK,
//! `template-libraries/sdk-python`, which speaks the same contract).
//!
//! Modules: [`claims`] (the admin's host-claim policy), [`extending`] (the extension points), [`haproxy`] (the one
//! writer of user text into each HAProxy context, and HAProxy's limits),
//! [`library`] (the trait and plan), [`values`], [`objects`] (the
//! object view and render context), [`output`] (the builder), [`names`]
//! (HAProxy-safe names and escaping), [`readiness`] (endpoint routing and
//! the pod readiness gate), [`slim`] (small types for Pods, EndpointSlices
//! and Services), [`log`], [`testing`].

extern crate self as haptic_sdk;

pub mod agent;
pub mod claims;
pub mod crypt;
mod error;
pub mod extending;
mod guest;
pub mod haproxy;
pub mod http3;
pub mod ingress;
mod key;
pub mod library;
pub mod log;
pub mod names;
pub mod objects;
pub mod output;
pub mod readiness;
mod runtime;
pub mod slim;
pub mod testing;
pub mod tls;
pub mod values;
mod watch;

pub use error::{Error, Result};
pub use key::ObjectKey;
pub use library::{Info, Library};
pub use objects::{Changed, Context, Entry};
pub use output::{Item, Output, SectionKind, Slot, StatusVariant};
pub use values::Values;
pub use watch::{Plan, Watch};

/// Kubernetes API types (the `k8s-openapi` crate, at the version the SDK
/// was built with).
pub use k8s_openapi as k8s;

/// The WIT bindings; not part of the SDK's API.
#[doc(hidden)]
pub mod wit {
    wit_bindgen::generate!({
        path: "../../wit/haptic-template@0.4.0",
        world: "template-library",
        pub_export_macro: true,
        default_bindings_module: "haptic_sdk::wit",
        runtime_path: "haptic_sdk::__private::wit_bindgen::rt",
        export_macro_name: "export_wit",
    });
}

/// Used by [`export_library!`]; not part of the SDK's API.
#[doc(hidden)]
pub mod __private {
    pub use crate::guest::Adapter;
    pub use wit_bindgen;
}

/// Exports a [`Library`] type as the component's `haptic:template/library`
/// implementation. Use it once, in the library crate's root.
#[macro_export]
macro_rules! export_library {
    ($library:ty) => {
        // Only WebAssembly gets the exports: their names (`haptic:template/...`)
        // break native linkers, and native builds are for unit tests.
        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        type __HapticExportedLibrary = $crate::__private::Adapter<$library>;
        #[cfg(target_arch = "wasm32")]
        $crate::wit::export_wit!(__HapticExportedLibrary with_types_in $crate::wit);
    };
}
