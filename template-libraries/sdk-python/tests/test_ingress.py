"""The class rules, on the Rust SDK's cases (haptic_sdk::ingress)."""

import unittest

from haptic_sdk.ingress import (
    DEFAULT_CLASS_ANNOTATION,
    LEGACY_ANNOTATION,
    ClassRules,
    matched_ingress_acl,
)
from haptic_sdk.values import Values

OURS = "haproxy-haptic.org/controller"


def ingress_class(name, controller, default=False):
    annotations = {DEFAULT_CLASS_ANNOTATION: "true"} if default else {}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": {"controller": controller}}


def ingress(class_name=None, legacy=None):
    annotations = {LEGACY_ANNOTATION: legacy} if legacy else {}
    spec = {"ingressClassName": class_name} if class_name else {}
    return {"metadata": {"name": "i", "annotations": annotations}, "spec": spec}


class ClassRulesTest(unittest.TestCase):
    rules = ClassRules()

    def test_class_name_must_name_one_of_our_classes(self):
        index = self.rules.classes([ingress_class("haptic", OURS), ingress_class("nginx", "k8s.io/ingress-nginx", True)])
        self.assertTrue(self.rules.is_served(ingress("haptic"), index))
        self.assertFalse(self.rules.is_served(ingress("nginx"), index))
        self.assertFalse(self.rules.is_served(ingress("missing"), index))
        self.assertFalse(self.rules.is_served(ingress(), index), "the default class is not ours")

    def test_classless_ingresses_follow_our_default_class(self):
        index = self.rules.classes([ingress_class("haptic", OURS, True)])
        self.assertTrue(self.rules.is_served(ingress(), index))
        self.assertFalse(self.rules.is_served(ingress(legacy="nginx"), index))

    def test_the_legacy_annotation_names_our_class_without_an_object(self):
        index = self.rules.classes([])
        self.assertTrue(self.rules.is_served(ingress(legacy="haptic"), index))
        self.assertFalse(self.rules.is_served(ingress(legacy="other"), index))
        self.assertFalse(self.rules.is_served(ingress("other", "haptic"), index), "spec wins over the annotation")

    def test_class_rules_follow_the_ingress_librarys_values(self):
        def values(tree):
            return Values(tree, "mine", {})

        self.assertEqual(ClassRules.from_values(values({})), ClassRules())
        rules = ClassRules.from_values(
            values({"ingress": {"className": "edge", "controller": "example.com/edge", "frontend": "http"}})
        )
        self.assertEqual((rules.class_name, rules.controller), ("edge", "example.com/edge"))
        index = rules.classes([ingress_class("edge", "example.com/edge")])
        self.assertTrue(rules.is_served(ingress("edge"), index))
        self.assertFalse(rules.is_served(ingress("haptic"), index))

    def test_the_acl_names_the_ingress(self):
        self.assertEqual(matched_ingress_acl("shop", "admin"), "{ var(txn.haptic_ingress) -m str shop/admin }")


if __name__ == "__main__":
    unittest.main()
