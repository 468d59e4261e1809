use super::*;
use haptic_sdk::testing::Harness;

#[test]
fn off_by_default() {
    assert_eq!(defaults()["enabled"], false);
}

#[test]
fn nothing_without_a_class_of_ours() {
    let mut h = Harness::<GatewayApi>::new(json!({})).unwrap();
    h.apply(
        GATEWAY_CLASSES,
        &json!({"metadata": {"name": "other"}, "spec": {"controllerName": "example.com/other"}}),
    );
    h.render().unwrap();
    assert!(
        h.section(SectionKind::Backend, INTERNAL_ERROR_BACKEND)
            .is_none()
    );
}
