"""The selection rule's shared cases (``selectors/cases.json``, which the
``haptic-selectors`` crate runs too), against the Python port."""

import copy
import json
import os
import unittest

from haptic_sdk import selectors
from haptic_sdk.selectors import SelectorError, Selection

CASES_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "selectors", "cases.json")

with open(CASES_FILE, encoding="utf-8") as cases_file:
    CASES = json.load(cases_file)


class SharedCasesTest(unittest.TestCase):
    def test_label_selectors(self):
        for group in CASES["labelSelectors"]:
            for selector, expected in group["selects"]:
                parsed = selectors.parse_label_selector(selector)
                self.assertEqual(parsed.matches(group["labels"]), expected, (selector, group["labels"]))
        for selector, says in CASES["badLabelSelectors"]:
            with self.assertRaises(SelectorError, msg=selector) as caught:
                selectors.parse_label_selector(selector)
            self.assertIn(says, str(caught.exception))

    def test_field_selectors(self):
        for group in CASES["fieldSelectors"]:
            for selector, expected in group["selects"]:
                parsed = selectors.parse_field_selector(selector, group["apiVersion"], group["kind"])
                self.assertEqual(parsed.matches(group["object"]), expected, (selector, group))
        for selector, says in CASES["badFieldSelectors"]:
            with self.assertRaises(SelectorError, msg=selector) as caught:
                selectors.parse_field_selector(selector)
            self.assertIn(says, str(caught.exception))
        for blank in CASES["blankFieldSelectors"]:
            self.assertTrue(selectors.parse_field_selector(blank).is_empty())

    def test_defaults_are_the_table_and_fill_only_what_is_missing(self):
        table = [
            {"apiVersion": d.api_version, "kind": d.kind, "path": d.path, "value": d.value, "stored": d.stored}
            for d in selectors.DEFAULTS
        ]
        self.assertEqual(table, CASES["defaults"])
        for case in CASES["appliedDefaults"]:
            obj = copy.deepcopy(case["object"])
            selectors.apply_defaults(case["apiVersion"], case["kind"], obj)
            self.assertEqual(obj, case["applied"], case)

    def test_selections(self):
        def parse(watch):
            return Selection(
                watch["apiVersion"],
                watch["kind"],
                watch.get("namespace"),
                watch.get("labelSelector"),
                watch.get("fieldSelector"),
            )

        for case in CASES["selections"]:
            self.assertEqual(parse(case["watch"]).matches(case["object"]), case["selected"], case)
        for case in CASES["badSelections"]:
            with self.assertRaises(SelectorError) as caught:
                parse(case["watch"])
            self.assertEqual(caught.exception.which, case["which"])
            self.assertTrue(str(caught.exception).startswith(case["says"]), str(caught.exception))


if __name__ == "__main__":
    unittest.main()
