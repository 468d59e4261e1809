import unittest

from haptic_sdk.names import backend_name, map_line, quote, sanitize
from haptic_sdk.values import Values, as_the_host_sends, camel_case, merge


class NamesTest(unittest.TestCase):
    # The same cases as the Rust SDK's `names` tests: both must agree.
    def test_backend_names_follow_the_shared_rule(self):
        self.assertEqual(backend_name("default", "web", 8080), "default_web_8080")
        self.assertEqual(backend_name("team-a", "api-v2", 80), "team-a_api-v2_80")
        self.assertEqual(backend_name("weird ns", "a/b", 1), "weird_ns_a_b_1")

    def test_sanitize_keeps_only_allowed_characters(self):
        self.assertEqual(sanitize("web-7d4b9.abc:1_x"), "web-7d4b9.abc:1_x")
        self.assertEqual(sanitize("a b\"c'd#é"), "a_b_c_d__")
        self.assertEqual(sanitize(""), "_")

    def test_quote_protects_every_special_character(self):
        self.assertEqual(quote("plain"), "'plain'")
        self.assertEqual(quote("it's $HOME \"x\" # \\"), "'it'\\''s $HOME \"x\" # \\'")
        self.assertEqual(quote("a\nb"), "'a b'")
        self.assertEqual(quote("a\u00a0b"), "'a\u00a0b'")

    def test_map_lines_reject_unusable_keys(self):
        self.assertEqual(map_line("a.example.com/x", "be"), "a.example.com/x be\n")
        for key in ["a b", "", "#x", "/a#b"]:
            self.assertIsNone(map_line(key, "be"), key)
        self.assertIsNone(map_line("k", "a\nb"))


class ValuesTest(unittest.TestCase):
    def test_camel_case_of_library_names(self):
        self.assertEqual(camel_case("base"), "base")
        self.assertEqual(camel_case("kubernetes-backends"), "kubernetesBackends")
        self.assertEqual(
            camel_case("status-patches-150-pod-readiness-gate"), "statusPatches150PodReadinessGate"
        )

    def test_the_hosts_subtree_is_used_as_is_and_defaults_only_without_one(self):
        defaults = {"podReadinessGate": {"enabled": False, "other": 2}, "balance": "roundrobin"}
        tree = {"kubernetesBackends": {"podReadinessGate": {"enabled": True}}}
        values = Values(tree, "kubernetes-backends", defaults)
        self.assertEqual(values.own, {"podReadinessGate": {"enabled": True}})
        self.assertEqual(Values({}, "kubernetes-backends", defaults).own, defaults)

    def test_null_removes_a_default_as_in_helm(self):
        defaults = {"global": {"log": "stdout", "maxconn": 10}}
        tree = as_the_host_sends({"base": {"global": {"log": None}}}, "base", defaults)
        self.assertEqual(Values(tree, "base", defaults).own, {"global": {"maxconn": 10}})
        self.assertEqual(defaults, {"global": {"log": "stdout", "maxconn": 10}}, "defaults untouched")
        self.assertEqual(merge({"a": [1, 2]}, {"a": [3]}), {"a": [3]})

    def test_values_must_be_objects(self):
        from haptic_sdk import RenderError

        with self.assertRaises(RenderError):
            Values([1], "base", {})
        with self.assertRaises(RenderError) as caught:
            Values({"base": 3}, "base", {})
        self.assertIn("templateLibraries.base", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
