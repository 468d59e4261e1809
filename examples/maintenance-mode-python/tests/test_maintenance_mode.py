"""Unit tests, run natively with the SDK's Harness:
``python3 -m unittest discover -s tests`` in this directory, with the SDK on
``PYTHONPATH``."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from haptic_sdk.testing import Harness  # noqa: E402

from maintenance_mode import EXACT_HOSTS_FILE, WILDCARD_HOSTS_FILE, MaintenanceMode  # noqa: E402


def ingress(name, *hosts, maintenance=True):
    annotations = {"maintenance.haproxy-haptic.org/enabled": "true"} if maintenance else {}
    return {
        "metadata": {"namespace": "shop", "name": name, "annotations": annotations},
        "spec": {"rules": [{"host": host} for host in hosts]},
    }


class MaintenanceModeTest(unittest.TestCase):
    def test_only_annotated_hosts_are_in_maintenance(self):
        harness = Harness(MaintenanceMode)
        harness.apply("ingresses", ingress("shop", "Shop.example.com"))
        harness.apply("ingresses", ingress("blog", "blog.example.com", maintenance=False))
        harness.render()
        self.assertEqual(harness.file(EXACT_HOSTS_FILE), "shop.example.com\n")
        self.assertIsNone(harness.file(WILDCARD_HOSTS_FILE))

    def test_wildcard_hosts_match_by_suffix(self):
        harness = Harness(MaintenanceMode)
        harness.apply("ingresses", ingress("shop", "*.Shop.example.com"))
        harness.render()
        self.assertEqual(harness.file(WILDCARD_HOSTS_FILE), ".shop.example.com\n")
        (snippet,) = [item for key, item in harness.output.items() if key.startswith("snippet:")]
        self.assertIn("-m end -f maps/maintenance-domains.lst", snippet.lines)
        self.assertNotIn(EXACT_HOSTS_FILE, snippet.lines)

    def test_lifting_maintenance_removes_the_rule_and_file(self):
        harness = Harness(MaintenanceMode)
        harness.apply("ingresses", ingress("shop", "shop.example.com"))
        harness.render()
        harness.apply("ingresses", ingress("shop", "shop.example.com", maintenance=False))
        delta = harness.render()
        self.assertFalse(delta.complete)
        self.assertEqual(len(delta.removals), 2, delta.removals)
        self.assertEqual(harness.output, {})

    def test_values_change_the_rule(self):
        harness = Harness(MaintenanceMode, {"maintenanceMode": {"retryAfterSeconds": 60}})
        harness.apply("ingresses", ingress("shop", "shop.example.com"))
        harness.render()
        (snippet,) = [item for key, item in harness.output.items() if key.startswith("snippet:")]
        self.assertIn("hdr Retry-After 60 string", snippet.lines)

    def test_unknown_values_are_refused_with_the_known_ones(self):
        from haptic_sdk import RenderError

        with self.assertRaises(RenderError) as caught:
            Harness(MaintenanceMode, {"maintenanceMode": {"retryAfter": 60}})
        self.assertIn("unknown values retryAfter", str(caught.exception))
        self.assertIn("retryAfterSeconds", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
