import unittest

from haptic_sdk import RenderError, SectionKind, Slot, StatusVariant
from haptic_sdk.output import Output, Section


def render(previous, complete, build):
    render_no = max((s.seen for s in previous.values()), default=0) + 1
    out = Output({} if complete else previous, render_no)
    build(out)
    return out._finish(complete)


def keys(delta):
    return [key for key, _ in delta.upserts]


class OutputTest(unittest.TestCase):
    def test_full_mode_sends_only_differences(self):
        def first(out):
            out.section("backend", "a", "server a 1.1.1.1:80")
            out.section(SectionKind.BACKEND, "b", "server b 1.1.1.2:80")

        sent, delta = render({}, True, first)
        self.assertTrue(delta.complete)
        self.assertEqual(keys(delta), ["section:backend:a", "section:backend:b"])

        def second(out):
            out.section("backend", "a", "server a 1.1.1.1:80")
            out.section("backend", "c", "")

        _, delta = render(sent, False, second)
        self.assertFalse(delta.complete)
        self.assertEqual(keys(delta), ["section:backend:c"])
        self.assertEqual(delta.removals, ["section:backend:b"])

    def test_a_changed_item_is_sent_again(self):
        sent, _ = render({}, True, lambda out: out.file("maps/a.map", "x 1\n"))
        _, delta = render(sent, False, lambda out: out.file("maps/a.map", "x 2\n"))
        self.assertEqual(keys(delta), ["file:maps/a.map"])
        self.assertEqual(delta.removals, [])

    def test_retain_mode_keeps_untouched_items(self):
        def first(out):
            out.section("backend", "a", "1")
            out.section("backend", "b", "1")

        sent, _ = render({}, True, first)

        def replace_a(out):
            out.retain_previous()
            out.section("backend", "a", "2")

        sent, delta = render(sent, False, replace_a)
        self.assertEqual(keys(delta), ["section:backend:a"])
        self.assertEqual(delta.removals, [])
        self.assertEqual(len(sent), 2)

        def remove_b(out):
            out.retain_previous()
            out.remove_section("backend", "b")

        sent, delta = render(sent, False, remove_b)
        self.assertEqual(delta.removals, ["section:backend:b"])
        self.assertEqual(list(sent), ["section:backend:a"])

    def test_an_item_added_and_removed_in_one_render_is_not_sent(self):
        sent, _ = render({}, True, lambda out: out.section("backend", "a", "1"))

        def churn(out):
            out.retain_previous()
            out.section("backend", "new", "1")
            out.remove_section("backend", "new")
            out.section("backend", "a", "2")
            out.remove_section("backend", "a")

        _, delta = render(sent, False, churn)
        self.assertEqual(delta.upserts, [])
        self.assertEqual(delta.removals, ["section:backend:a"])

    def test_duplicate_sections_are_an_error_and_duplicate_snippets_are_not(self):
        out = Output()
        out.section("frontend", "http", "")
        with self.assertRaises(RenderError) as caught:
            out.section("frontend", "http", "")
        self.assertIn("section:frontend:http", str(caught.exception))
        out.snippet("frontend", "http", Slot.ACLS, "acl x always_true")
        out.snippet("frontend", "http", "acls", "acl x always_true")
        sent, delta = out._finish(True)
        self.assertEqual(len(sent), 3)
        self.assertEqual(len(delta.upserts), 3)
        self.assertTrue(keys(delta)[2].endswith("~2"), keys(delta))

    def test_status_patches_are_keyed_by_object_and_serialized_sorted(self):
        out = Output()
        out.status_patch("deployed", "v1", "Pod", "shop", "web-1", {"b": 1, "a": [True]})
        ((key, patch),) = out._finish(True)[1].upserts
        self.assertEqual(key, "status:deployed:v1:Pod:shop/web-1")
        self.assertEqual(patch.variant, StatusVariant.DEPLOYED)
        self.assertEqual(patch.status, '{"a":[true],"b":1}')

    def test_unknown_kinds_and_slots_are_refused(self):
        out = Output()
        with self.assertRaises(ValueError):
            out.section("frontnd", "http", "")
        with self.assertRaises(ValueError):
            out.snippet("frontend", "http", "rules", "x")

    def test_items_are_plain_frozen_data(self):
        out = Output()
        out.section("backend", "a", "body")
        ((_, item),) = out._finish(True)[1].upserts
        self.assertEqual(item, Section(SectionKind.BACKEND, "a", "body"))


if __name__ == "__main__":
    unittest.main()
