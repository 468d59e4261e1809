"""What contract 0.3.0 adds, as the Python SDK offers it: field selectors in
the harness (the host's rule), secret text and files, warnings, owned
objects, and the host's tls and crypt imports (which natively say they need
the host)."""

import unittest

import haptic_sdk as haptic
from haptic_sdk import RenderError, crypt, tls
from haptic_sdk.objects import ObjectKey
from haptic_sdk.output import File, OwnedObject, Section, Snippet, Warning
from haptic_sdk.testing import Harness


class OpaqueSecrets(haptic.Library):
    """Lists the Secrets its ``type=Opaque`` watch delivers, with the type it sees."""

    name = "opaque-secrets"

    def plan(self, values):
        return haptic.Plan([haptic.Watch("secrets", "v1", "Secret", field_selector="type=Opaque")])

    def render(self, ctx, out):
        seen = "".join(f"{key.name} {secret.get('type', 'none')}\n" for key, secret in ctx.items("secrets"))
        out.file("secrets.txt", seen)


def secret(name, kind=None):
    obj = {"metadata": {"namespace": "shop", "name": name}}
    if kind:
        obj["type"] = kind
    return obj


class FieldSelectorTest(unittest.TestCase):
    def test_field_selectors_select_as_the_host_does(self):
        harness = Harness(OpaqueSecrets)
        self.assertEqual(harness.plan.watches[0].field_selector, "type=Opaque")
        harness.apply("secrets", secret("cert", "kubernetes.io/tls"))
        harness.apply("secrets", secret("plain"))
        harness.apply("secrets", secret("db", "Opaque"))
        harness.render()
        # A TLS Secret does not reach a type=Opaque watch; one without type is Opaque.
        self.assertEqual(harness.file("secrets.txt"), "db Opaque\nplain Opaque\n")
        harness.apply("secrets", secret("db", "kubernetes.io/tls"))
        harness.render()
        # An object the watch no longer selects is deleted.
        self.assertEqual(harness.file("secrets.txt"), "plain Opaque\n")

    def test_a_selector_that_does_not_parse_fails_the_render(self):
        class BadSelector(OpaqueSecrets):
            name = "bad-selector"

            def plan(self, values):
                return haptic.Plan([haptic.Watch("secrets", "v1", "Secret", field_selector="type")])

        harness = Harness(BadSelector)
        harness.apply("secrets", secret("db"))
        with self.assertRaises(RenderError) as caught:
            harness.render()
        self.assertIn("watch `secrets` has an invalid field selector 'type'", str(caught.exception))


class BasicAuth(haptic.Library):
    """Every 0.3.0 output kind once."""

    name = "basic-auth-sketch"

    def plan(self, values):
        return haptic.Plan(
            [haptic.Watch("ingresses", "networking.k8s.io/v1", "Ingress")], applies=["v1/Service"]
        )

    def render(self, ctx, out):
        out.secret_section("userlist", "users", "    user admin password $6$salt$hash\n")
        out.secret_snippet(
            "auth-header", "backend", "default_web_80", "request-rules", "    http-request set-header Authorization 'Bearer t'\n"
        )
        out.secret_file("certs/site.pem", "-----BEGIN PRIVATE KEY-----\n")
        owner = ObjectKey("ingresses", "shop", "web")
        out.warning(owner, "TLSSecretMissing", "Ingress shop/web names no Secret; served with the default certificate.")
        out.warning(None, "NoIngresses", "no Ingress is annotated.")
        out.owned_object(owner, "v1", "Service", "web-auth", {"spec": {"type": "ClusterIP"}})


class OutputTest(unittest.TestCase):
    def test_every_output_kind_of_the_contract(self):
        harness = Harness(BasicAuth)
        self.assertEqual(harness.plan.applies, ["v1/Service"])
        harness.render()
        owner = ObjectKey("ingresses", "shop", "web")
        self.assertEqual(
            harness.output["section:userlist:users"],
            Section(haptic.SectionKind.USERLIST, "users", "    user admin password $6$salt$hash\n", secret=True),
        )
        snippet = harness.output["auth-header"]
        self.assertIsInstance(snippet, Snippet)
        self.assertTrue(snippet.secret)
        self.assertEqual(
            harness.output["file:certs/site.pem"], File("certs/site.pem", "-----BEGIN PRIVATE KEY-----\n", secret=True)
        )
        self.assertEqual(
            harness.warnings(),
            [
                ("NoIngresses", "no Ingress is annotated."),
                ("TLSSecretMissing", "Ingress shop/web names no Secret; served with the default certificate."),
            ],
        )
        keys = sorted(k for k, item in harness.output.items() if isinstance(item, Warning))
        self.assertTrue(keys[1].startswith("warning:TLSSecretMissing:ingresses:shop/web:"), keys)
        self.assertEqual(harness.owned_objects(), {"v1/Service/web-auth": {"spec": {"type": "ClusterIP"}}})
        self.assertEqual(harness.output["owned:v1:Service:web-auth"].owner, owner)
        self.assertIsInstance(harness.output["owned:v1:Service:web-auth"], OwnedObject)

    def test_plain_items_are_not_secret(self):
        out = haptic.Output()
        out.section("backend", "a", "x")
        out.snippet("frontend", "http", "acls", "acl a always_true")
        out.file("maps/a.map", "a 1\n")
        _, delta = out._finish(True)
        self.assertEqual([item.secret for _, item in delta.upserts], [False, False, False])

    def test_a_changed_warning_is_a_new_item_and_the_old_one_goes(self):
        class Flapping(BasicAuth):
            message = "first"

            def render(self, ctx, out):
                out.warning(None, "Odd", type(self).message)

        harness = Harness(Flapping)
        harness.render()
        Flapping.message = "second"
        harness.apply("ingresses", {"metadata": {"namespace": "a", "name": "b"}})
        delta = harness.render()
        self.assertEqual(len(delta.upserts), 1)
        self.assertEqual(len(delta.removals), 1)
        self.assertEqual(harness.warnings(), [("Odd", "second")])


class HostImportsTest(unittest.TestCase):
    def test_natively_the_checks_say_they_need_the_host(self):
        with self.assertRaises(tls.CertificateError) as caught:
            tls.check_certificate("cert", "key")
        self.assertIn("checked by the haptic host", str(caught.exception))
        self.assertEqual(tls.default_certificate(), "")
        with self.assertRaises(crypt.PasswordHashError) as caught:
            crypt.check_password_hash("$6$salt$hash")
        self.assertIn("checked by the haptic host", str(caught.exception))
        self.assertNotIn("$6$", str(caught.exception))

    def test_wildcards_cover_one_label(self):
        info = tls.CertificateInfo(("*.example.com", "foo.bar.com"), 0, 0)
        self.assertTrue(info.covers("a.example.com"))
        self.assertTrue(info.covers("FOO.bar.com"))
        self.assertFalse(info.covers("example.com"))
        self.assertFalse(info.covers("a.b.example.com"))
        self.assertFalse(info.covers(".example.com"))
        self.assertFalse(info.covers("bar.com"))


if __name__ == "__main__":
    unittest.main()
