//! What every contract version's bindings module has in common: the
//! conversions of types that did not change between versions, the `log`
//! import, and the typed pre-instance and exports. A macro rather than
//! generic code because each version's `bindgen!` generates its own,
//! unrelated types with the same shape.
//!
//! Invoked inside a version module that defines `bindings` (the `bindgen!`
//! output), `wit` (its `types` interface), `plan_from_wit`,
//! `item_from_wit`, `section_secret` and `snippet_secret` (the parts that
//! differ between versions).

macro_rules! common_bindings {
    () => {
        impl bindings::haptic::template::types::Host for StoreState {}

        impl bindings::haptic::template::host::Host for StoreState {
            fn log(&mut self, level: wit::LogLevel, message: String) {
                let level = match level {
                    wit::LogLevel::Trace => GuestLogLevel::Trace,
                    wit::LogLevel::Debug => GuestLogLevel::Debug,
                    wit::LogLevel::Info => GuestLogLevel::Info,
                    wit::LogLevel::Warn => GuestLogLevel::Warn,
                    wit::LogLevel::Error => GuestLogLevel::Error,
                };
                self.guest_log(level, message);
            }
        }

        /// Adds this version's host imports.
        pub(in crate::library) fn add_to_linker(
            linker: &mut Linker<StoreState>,
        ) -> wasmtime::Result<()> {
            bindings::TemplateLibrary::add_to_linker::<StoreState, HasSelf<StoreState>>(
                linker,
                |state| state,
            )
        }

        /// A component checked against this version's world, ready to instantiate.
        pub(in crate::library) struct Pre(bindings::TemplateLibraryPre<StoreState>);

        impl Pre {
            /// Fails when the component lacks an export of this version or has the
            /// wrong types for one.
            pub(in crate::library) fn new(
                instance_pre: InstancePre<StoreState>,
            ) -> wasmtime::Result<Self> {
                bindings::TemplateLibraryPre::new(instance_pre).map(Self)
            }

            pub(in crate::library) fn instantiate(
                &self,
                store: &mut Store<StoreState>,
            ) -> wasmtime::Result<Exports> {
                self.0.instantiate(store).map(Exports)
            }
        }

        /// The exports of one instance.
        pub(in crate::library) struct Exports(bindings::TemplateLibrary);

        impl Exports {
            pub(in crate::library) fn describe(
                &self,
                store: &mut Store<StoreState>,
            ) -> wasmtime::Result<Result<types::LibraryInfo, Malformed>> {
                let info = self.0.haptic_template_library().call_describe(store)?;
                let default_values = match serde_json::from_str(&info.default_values) {
                    Ok(values) => values,
                    Err(error) => return Ok(Err(Malformed::BadDefaultValues(error.to_string()))),
                };
                Ok(Ok(types::LibraryInfo {
                    name: info.name,
                    version: info.version,
                    order: info.order,
                    default_values,
                }))
            }

            pub(in crate::library) fn configure(
                &self,
                store: &mut Store<StoreState>,
                values: &str,
            ) -> wasmtime::Result<Result<types::Plan, types::GuestError>> {
                let plan = self
                    .0
                    .haptic_template_library()
                    .call_configure(store, values)?;
                Ok(plan.map(plan_from_wit).map_err(error_from_wit))
            }

            pub(in crate::library) fn render(
                &self,
                store: &mut Store<StoreState>,
                changes: Vec<types::Change>,
            ) -> wasmtime::Result<
                Result<crate::library::contract::ConvertedOutput, types::GuestError>,
            > {
                let changes: Vec<wit::Change> = changes.into_iter().map(change_to_wit).collect();
                let output = self
                    .0
                    .haptic_template_library()
                    .call_render(store, &changes)?;
                Ok(output.map(output_from_wit).map_err(error_from_wit))
            }
        }

        fn error_from_wit(error: wit::RenderError) -> types::GuestError {
            types::GuestError {
                message: error.message,
                object: error.object.map(key_from_wit),
            }
        }

        fn key_from_wit(key: wit::ObjectKey) -> types::ObjectKey {
            types::ObjectKey {
                watch: key.watch,
                namespace: key.namespace,
                name: key.name,
            }
        }

        fn key_to_wit(key: types::ObjectKey) -> wit::ObjectKey {
            wit::ObjectKey {
                watch: key.watch,
                namespace: key.namespace,
                name: key.name,
            }
        }

        fn change_to_wit(change: types::Change) -> wit::Change {
            match change {
                types::Change::Applied(object) => wit::Change::Applied(wit::Object {
                    key: key_to_wit(object.key),
                    resource_version: object.resource_version,
                    json: object.json,
                }),
                types::Change::Deleted(key) => wit::Change::Deleted(key_to_wit(key)),
            }
        }

        fn output_from_wit(output: wit::RenderOutput) -> crate::library::contract::ConvertedOutput {
            let upserts = output
                .upserts
                .into_iter()
                .map(|keyed| match item_from_wit(keyed.item) {
                    Ok(item) => Ok((keyed.key, item)),
                    Err(problem) => Err((Some(keyed.key), problem)),
                })
                .collect::<Result<_, _>>()?;
            Ok(types::RenderOutput {
                complete: output.complete,
                upserts,
                removals: output.removals,
            })
        }

        fn section_from_wit(section: wit::Section) -> types::Item {
            let secret = section_secret(&section);
            types::Item::Section(Arc::new(types::Section {
                kind: kind_from_wit(section.kind),
                name: section.name,
                body: section.body,
                secret,
            }))
        }

        fn snippet_from_wit(snippet: wit::Snippet) -> types::Item {
            let secret = snippet_secret(&snippet);
            types::Item::Snippet(Arc::new(types::Snippet {
                target_kind: kind_from_wit(snippet.target_kind),
                target_name: snippet.target_name,
                slot: slot_from_wit(snippet.slot),
                priority: snippet.priority,
                lines: snippet.lines,
                secret,
            }))
        }

        fn patch_from_wit(patch: wit::StatusPatch) -> Result<types::Item, Malformed> {
            let object = types::ObjectRef {
                api_version: patch.api_version,
                kind: patch.kind,
                namespace: patch.namespace,
                name: patch.name,
            };
            let status = crate::library::checks::parse_status(&object, &patch.status)?;
            Ok(types::Item::StatusPatch(Arc::new(types::StatusPatch {
                variant: variant_from_wit(patch.variant),
                object,
                status: types::PatchStatus::new(&status),
            })))
        }

        fn kind_from_wit(kind: wit::SectionKind) -> types::SectionKind {
            use types::SectionKind as K;
            match kind {
                wit::SectionKind::Global => K::Global,
                wit::SectionKind::Defaults => K::Defaults,
                wit::SectionKind::Frontend => K::Frontend,
                wit::SectionKind::Backend => K::Backend,
                wit::SectionKind::Listen => K::Listen,
                wit::SectionKind::Userlist => K::Userlist,
                wit::SectionKind::Resolvers => K::Resolvers,
                wit::SectionKind::Peers => K::Peers,
                wit::SectionKind::Cache => K::Cache,
                wit::SectionKind::Ring => K::Ring,
                wit::SectionKind::HttpErrors => K::HttpErrors,
            }
        }

        fn slot_from_wit(slot: wit::Slot) -> types::Slot {
            match slot {
                wit::Slot::Acls => types::Slot::Acls,
                wit::Slot::RequestRules => types::Slot::RequestRules,
                wit::Slot::ResponseRules => types::Slot::ResponseRules,
                wit::Slot::Routing => types::Slot::Routing,
                wit::Slot::Other => types::Slot::Other,
            }
        }

        fn variant_from_wit(variant: wit::StatusVariant) -> types::StatusVariant {
            match variant {
                wit::StatusVariant::Rendered => types::StatusVariant::Rendered,
                wit::StatusVariant::Deployed => types::StatusVariant::Deployed,
                wit::StatusVariant::RenderFailed => types::StatusVariant::RenderFailed,
                wit::StatusVariant::DeployFailed => types::StatusVariant::DeployFailed,
            }
        }
    };
}
