//! The lifecycle as the host drives it, through the test harness.

use std::cell::Cell;

use serde::Deserialize;
use serde_json::json;

use crate::testing::Harness;
use crate::{Context, Error, Info, Library, Output, Plan, Result, SectionKind, Values, Watch};

#[derive(Debug, Deserialize)]
struct Thing {
    metadata: Meta,
    size: u32,
}

#[derive(Debug, Deserialize)]
struct Meta {
    name: String,
}

thread_local! {
    /// Tests run on their own threads, so each counts its own renders.
    static RENDERS: Cell<u32> = const { Cell::new(0) };
}

/// Renders one backend per `Thing`; fails when a thing has size 13; counts renders.
#[derive(Default)]
struct Things {
    watch_extra: bool,
}

impl Library for Things {
    fn info(&self) -> Info {
        Info::new("things", "1.0.0").defaults(json!({"extra": false}))
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        self.watch_extra = values.own()["extra"].as_bool().unwrap_or(false);
        let mut things = Watch::new("things", "example.com/v1", "Thing").parse_as::<Thing>();
        if values.own()["strict"].as_bool().unwrap_or(false) {
            things = things.strict();
        }
        let mut plan = Plan::default().watch(things);
        if self.watch_extra {
            plan = plan.watch(Watch::new("extra", "v1", "ConfigMap"));
        }
        Ok(plan)
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        RENDERS.with(|r| r.set(r.get() + 1));
        for thing in ctx.objects::<Thing>("things")? {
            if thing.size == 13 {
                return Err(Error::object(thing.key, "size 13 is unlucky"));
            }
            out.section(
                SectionKind::Backend,
                thing.metadata.name.clone(),
                format!("# {}\n", thing.size),
            )?;
        }
        Ok(())
    }
}

fn thing(name: &str, size: u32, version: &str) -> serde_json::Value {
    json!({"metadata": {"namespace": "ns", "name": name, "resourceVersion": version}, "size": size})
}

fn renders() -> u32 {
    RENDERS.with(|r| r.get())
}

#[test]
fn the_same_resource_version_is_no_change_and_nothing_renders() {
    let mut h = Harness::<Things>::new(json!({})).unwrap();
    h.apply("things", &thing("a", 1, "1"));
    assert!(h.render().unwrap().complete);
    let before = renders();
    h.apply("things", &thing("a", 1, "1"));
    let delta = h.render().unwrap();
    assert_eq!(
        renders(),
        before,
        "the library is not called without a change"
    );
    assert!(delta.upserts.is_empty() && delta.removals.is_empty() && !delta.complete);
    h.apply("things", &thing("a", 2, "2"));
    assert_eq!(h.render().unwrap().upserts.len(), 1);
}

#[test]
fn a_failed_render_makes_the_next_one_complete() {
    let mut h = Harness::<Things>::new(json!({})).unwrap();
    h.apply("things", &thing("a", 1, "1"));
    h.render().unwrap();
    h.apply("things", &thing("b", 13, "1"));
    let err = h.render().unwrap_err();
    assert_eq!(err.object_key().map(|k| k.name.as_str()), Some("b"));
    h.apply("things", &thing("b", 14, "2"));
    let delta = h.render().unwrap();
    assert!(delta.complete);
    assert_eq!(delta.upserts.len(), 2);
}

/// Issue 24, item 4: one object that does not parse no longer fails the
/// render of every other object.
#[test]
fn an_object_that_does_not_parse_is_left_out_with_a_warning_until_fixed() {
    let mut h = Harness::<Things>::new(json!({})).unwrap();
    h.apply("things", &thing("a", 1, "1"));
    h.apply("things", &json!({"metadata": {"namespace": "ns", "name": "bad", "resourceVersion": "1"}, "size": "big"}));
    h.apply("things", &thing("c", 3, "1"));
    h.render().expect("the good objects render");
    assert!(h.section(SectionKind::Backend, "a").is_some());
    assert!(h.section(SectionKind::Backend, "c").is_some());
    assert!(h.section(SectionKind::Backend, "bad").is_none());
    let warnings = h.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].0, "ObjectUnreadable");
    assert!(
        warnings[0]
            .1
            .contains("cannot read things ns/bad (resourceVersion 1)")
            && warnings[0].1.contains("left out of the configuration"),
        "{warnings:?}"
    );
    // A render with nothing else changed keeps it; fixing it removes it.
    h.apply("things", &thing("a", 2, "2"));
    h.render().unwrap();
    assert_eq!(h.warnings().len(), 1);
    h.apply("things", &thing("bad", 5, "2"));
    let delta = h.render().unwrap();
    assert!(h.warnings().is_empty(), "{:?}", h.warnings());
    assert!(
        delta
            .removals
            .iter()
            .any(|key| key.contains("ObjectUnreadable")),
        "the host is told the warning is gone: {delta:?}"
    );
    assert!(h.section(SectionKind::Backend, "bad").is_some());
}

#[test]
fn a_strict_watch_fails_every_render_until_fixed() {
    let mut h = Harness::<Things>::new(json!({"things": {"strict": true}})).unwrap();
    h.apply("things", &json!({"metadata": {"namespace": "ns", "name": "bad", "resourceVersion": "1"}, "size": "big"}));
    let err = h.render().unwrap_err();
    assert!(err.to_string().contains("things ns/bad"), "{err}");
    assert!(h.render().is_err(), "still broken without a new version");
    h.delete("things", "ns", "bad");
    assert!(h.render().is_ok());
}

#[test]
fn reconfiguring_keeps_objects_of_watches_still_planned() {
    let mut h = Harness::<Things>::new(json!({})).unwrap();
    h.apply("things", &thing("a", 1, "1"));
    h.render().unwrap();
    h.configure(json!({"things": {"extra": true}})).unwrap();
    assert_eq!(h.plan().watches.len(), 2);
    let delta = h.render().unwrap();
    assert!(delta.complete);
    assert_eq!(
        delta.upserts.len(),
        1,
        "thing a is still known without being sent again"
    );
}

#[test]
fn objects_of_an_unplanned_watch_are_refused() {
    let mut h = Harness::<Things>::new(json!({})).unwrap();
    h.apply("extra", &json!({"metadata": {"name": "x"}}));
    assert!(matches!(h.render(), Err(Error::UnknownWatch { .. })));
}

#[derive(Default)]
struct WrongType;

impl Library for WrongType {
    fn info(&self) -> Info {
        Info::new("wrong-type", "1.0.0")
    }

    fn plan(&mut self, _: &Values) -> Result<Plan> {
        Ok(Plan::default()
            .watch(Watch::new("things", "example.com/v1", "Thing").parse_as::<Thing>()))
    }

    fn render(&mut self, ctx: &Context<'_>, _: &mut Output) -> Result<()> {
        ctx.objects::<serde_json::Value>("things")?.count();
        Ok(())
    }
}

#[test]
fn asking_for_another_type_than_declared_is_an_error() {
    let mut h = Harness::<WrongType>::new(json!({})).unwrap();
    let err = h.render().unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
}

/// Reads `things` lazily and renders the size of `ns/a`.
#[derive(Default)]
struct Lazy;

impl Library for Lazy {
    fn info(&self) -> Info {
        Info::new("lazy", "1.0.0")
    }

    fn plan(&mut self, _: &Values) -> Result<Plan> {
        Ok(Plan::default().watch(
            Watch::new("things", "example.com/v1", "Thing")
                .parse_as::<Thing>()
                .lazy(),
        ))
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        let size = ctx.get::<Thing>("things", "ns", "a")?.map_or(0, |t| t.size);
        out.file("size", size.to_string())
    }
}

#[test]
fn a_lazy_watch_parses_on_access_and_skips_what_does_not_parse() {
    let mut h = Harness::<Lazy>::new(json!({})).unwrap();
    h.apply(
        "things",
        &json!({"metadata": {"namespace": "ns", "name": "a"}, "size": "big"}),
    );
    h.apply("things", &thing("b", 1, "1"));
    h.render().unwrap();
    assert_eq!(h.file("size"), Some("0"), "the bad object reads as absent");
    h.apply("things", &thing("a", 7, "2"));
    h.render().unwrap();
    assert_eq!(h.file("size"), Some("7"));
}
