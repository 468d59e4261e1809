import json
import unittest

import haptic_sdk as haptic
from haptic_sdk import RenderError
from haptic_sdk._guest import describe_exception
from haptic_sdk.objects import Applied, ObjectKey
from haptic_sdk.testing import Harness


class ServiceMap(haptic.Library):
    """Renders one map line per Service; counts its renders."""

    name = "service-map"
    defaults = {"fileName": "services.map", "fail": False}

    def __init__(self):
        self.renders = 0
        self.seen_changes = []

    def plan(self, values):
        return haptic.Plan([haptic.Watch("services", "v1", "Service", ignore_fields=["status"])])

    def render(self, ctx, out):
        self.renders += 1
        self.seen_changes.append((ctx.complete, [str(c.key) for c in ctx.changes]))
        if ctx.values["fail"]:
            raise RenderError("told to fail")
        lines = []
        for key, service in ctx.items("services"):
            line = haptic.names.map_line(f"{key.namespace}/{key.name}", service["spec"]["clusterIP"])
            if line:
                lines.append(line)
        out.file(ctx.values["fileName"], "".join(lines))


def service(namespace, name, ip, version=None):
    metadata = {"namespace": namespace, "name": name}
    if version:
        metadata["resourceVersion"] = version
    return {"metadata": metadata, "spec": {"clusterIP": ip}}


class RuntimeTest(unittest.TestCase):
    def test_first_render_is_complete_then_deltas_follow(self):
        harness = Harness(ServiceMap)
        self.assertEqual(
            harness.plan.watches[0].ignore_fields, ["metadata.managedFields", "status"]
        )
        harness.apply("services", service("b", "web", "10.0.0.2"))
        harness.apply("services", service("a", "web", "10.0.0.1"))
        delta = harness.render()
        self.assertTrue(delta.complete)
        self.assertEqual(harness.file("services.map"), "a/web 10.0.0.1\nb/web 10.0.0.2\n")

        harness.delete("services", "a", "web")
        delta = harness.render()
        self.assertFalse(delta.complete)
        self.assertEqual(harness.file("services.map"), "b/web 10.0.0.2\n")
        self.assertEqual(harness.runtime.library.seen_changes[-1], (False, ["services a/web"]))

    def test_objects_stay_sorted_through_updates_inserts_and_deletes(self):
        harness = Harness(ServiceMap)
        for namespace, name in [("b", "web"), ("a", "z"), ("a", "m")]:
            harness.apply("services", service(namespace, name, "10.0.0.1"))
        harness.render()
        harness.apply("services", service("a", "m", "10.0.0.2"))  # an update
        harness.apply("services", service("a", "b", "10.0.0.3"))  # a new one, first
        harness.apply("services", service("0", "x", "10.0.0.4"))  # a new namespace, first
        harness.delete("services", "b", "web")
        harness.render()
        self.assertEqual(
            harness.file("services.map"), "0/x 10.0.0.4\na/b 10.0.0.3\na/m 10.0.0.2\na/z 10.0.0.1\n"
        )

    def test_nothing_changed_means_the_library_is_not_called(self):
        harness = Harness(ServiceMap)
        harness.apply("services", service("a", "web", "10.0.0.1", version="7"))
        harness.render()
        harness.apply("services", service("a", "web", "10.0.0.1", version="7"))
        delta = harness.render()
        self.assertEqual((delta.upserts, delta.removals), ([], []))
        self.assertEqual(harness.runtime.library.renders, 1)

    def test_after_a_failed_render_the_next_is_complete(self):
        harness = Harness(ServiceMap)
        harness.apply("services", service("a", "web", "10.0.0.1"))
        harness.render()
        harness.configure({"serviceMap": {"fail": True}})
        with self.assertRaises(RenderError):
            harness.render()
        harness.configure({})
        delta = harness.render()
        self.assertTrue(delta.complete)
        self.assertEqual(harness.file("services.map"), "a/web 10.0.0.1\n")

    def test_an_object_that_is_not_json_is_left_out_with_a_warning_until_fixed(self):
        harness = Harness(ServiceMap)
        harness.apply("services", service("a", "web", "10.0.0.1"))
        harness.render()
        key = ObjectKey("services", "a", "broken")
        harness._pending.append(Applied(key, "1", "{not json"))
        harness.render()
        self.assertEqual(harness.file("services.map"), "a/web 10.0.0.1\n", "the rest renders")
        ((reason, message),) = harness.warnings()
        self.assertEqual(reason, "ObjectUnreadable")
        self.assertIn("cannot read services a/broken (resourceVersion 1) as JSON", message)
        self.assertIn("left out of the configuration until it is fixed", message)
        self.assertEqual(harness.output["warning:ObjectUnreadable:services a/broken"].object, key)
        harness.apply("services", service("a", "broken", "10.0.0.9", version="2"))
        harness.render()
        self.assertEqual(harness.warnings(), [], "fixed: the warning goes")
        self.assertEqual(harness.file("services.map"), "a/broken 10.0.0.9\na/web 10.0.0.1\n")

    def test_in_a_strict_watch_an_object_that_is_not_json_fails_every_render_until_fixed(self):
        class Strict(ServiceMap):
            def plan(self, values):
                return haptic.Plan([haptic.Watch("services", "v1", "Service", strict=True)])

        harness = Harness(Strict)
        harness.render()
        key = ObjectKey("services", "a", "broken")
        harness._pending.append(Applied(key, "1", "{not json"))
        with self.assertRaises(RenderError) as caught:
            harness.render()
        self.assertEqual(caught.exception.object, key)
        self.assertIn("cannot read services a/broken (resourceVersion 1) as JSON", str(caught.exception))
        with self.assertRaises(RenderError):
            harness.render()
        harness.apply("services", service("a", "broken", "10.0.0.9", version="2"))
        harness.render()
        self.assertEqual(harness.file("services.map"), "a/broken 10.0.0.9\n")

    def test_an_object_of_an_unplanned_watch_is_refused(self):
        harness = Harness(ServiceMap)
        harness.apply("pods", service("a", "web", "10.0.0.1"))
        with self.assertRaises(RenderError) as caught:
            harness.render()
        self.assertIn("did not plan", str(caught.exception))

    def test_reading_an_unplanned_watch_names_the_planned_ones(self):
        class Reader(ServiceMap):
            def render(self, ctx, out):
                list(ctx.objects("ingresses"))

        with self.assertRaises(RenderError) as caught:
            Harness(Reader).render()
        self.assertIn("watch `ingresses` is not part of the current plan (planned: `services`)", str(caught.exception))

    def test_a_class_that_cannot_be_a_library_is_refused_with_what_to_fix(self):
        class Nameless(haptic.Library):
            def render(self, ctx, out):
                pass

        with self.assertRaises(TypeError) as caught:
            haptic.export(Nameless)
        self.assertIn("has no `name`", str(caught.exception))
        with self.assertRaises(TypeError):
            haptic.export(object)

        class Unserializable(ServiceMap):
            defaults = {"when": object()}

        with self.assertRaises(TypeError) as caught:
            haptic.export(Unserializable)
        self.assertIn("Unserializable.defaults must be a JSON object", str(caught.exception))

    def test_unexpected_exceptions_name_the_library_line(self):
        def library_code():
            return {}["spec"]

        try:
            library_code()
        except KeyError as error:
            text = describe_exception(error)
        self.assertRegex(text, r"^KeyError: 'spec' \(at test_runtime\.py:\d+, in library_code\)$")

    def test_values_read_like_a_dict_and_a_missing_one_says_where(self):
        harness = Harness(ServiceMap, {"serviceMap": {"fileName": None}, "other": {"x": 1}})
        values = harness.runtime.values
        self.assertEqual(dict(values), {"fail": False})
        self.assertEqual(values.of("other"), {"x": 1})
        with self.assertRaises(RenderError) as caught:
            values["fileName"]
        self.assertEqual(
            str(caught.exception),
            "`templateLibraries.serviceMap.fileName` is not set and has no default; "
            "set it in the Helm values",
        )
        self.assertEqual(values.get("fileName", "fallback.map"), "fallback.map")
        self.assertNotIn("fileName", values)

    def test_export_works_natively_so_app_modules_import_in_unit_tests(self):
        exported = haptic.export(ServiceMap)
        self.assertIsInstance(exported, type)
        self.assertEqual(json.loads(json.dumps(ServiceMap.defaults)), ServiceMap.defaults)


if __name__ == "__main__":
    unittest.main()
