"""Tests of proctor_client against a running Proctor (PROCTOR_API_URL, PROCTOR_API_KEY), as `task
test` runs them (cmd/proctor's TestPythonClient starts `proctor dev` for them): the demo taskset
by the oracle model, which solves every task."""

import json
import os
import tempfile
import unittest

from proctor_client import Client, ProctorError


@unittest.skipUnless(os.environ.get("PROCTOR_API_KEY"), "needs a running Proctor: PROCTOR_API_URL and PROCTOR_API_KEY")
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = Client()
        cls.job = cls.client.run_list(taskset_id=cls.client.taskset_id("demo"),
                                      model_ids=[cls.client.model_id("oracle")], group_size=2, name="python client")

    def test_groups_come_once_each_when_all_their_attempts_ended(self):
        groups = list(self.client.groups(self.job))
        attempts = self.client.attempts(self.job)
        self.assertGreater(len(groups), 0)
        self.assertEqual(len({g.id for g in groups}), len(groups), "a group was yielded twice")
        self.assertEqual(sum(len(g.attempts) for g in groups), len(attempts))
        for g in groups:
            self.assertEqual(len(g.attempts), 2, g)
            self.assertTrue(all(a.status == "completed" for a in g.attempts), g)
            self.assertEqual(g.rewards, [1.0, 1.0], g)
        # A caller that resumes after what it took gets nothing twice; one that resumes in the
        # middle gets the rest, each group whole.
        self.assertEqual(list(self.client.groups(self.job, after=groups[-1].seq)), [])
        rest = list(self.client.groups(self.job, after=groups[0].seq))
        self.assertEqual([g.id for g in rest], [g.id for g in groups[1:]])
        self.assertTrue(all(len(g.attempts) == 2 for g in rest), rest)
        # Attempt by attempt, numbered from 1, each once.
        attempts_seen = list(self.client.finished(self.job))
        self.assertEqual([a["seq"] for a in attempts_seen], list(range(1, len(attempts) + 1)))

    def test_export_writes_a_line_per_attempt(self):
        list(self.client.groups(self.job))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "job.jsonl")
            n = self.client.export(self.job, path, valid_only="true")
            with open(path) as f:
                lines = [json.loads(line) for line in f]
        self.assertEqual(n, len(self.client.attempts(self.job)))
        self.assertEqual(len(lines), n)
        for line in lines:
            self.assertEqual(line["reward"], 1.0)
            self.assertTrue(line["messages"], line)

    def test_errors_carry_the_apis_status(self):
        with self.assertRaises(ProctorError) as e:
            self.client.model_id("no-such-model")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"), e.exception)
        self.assertIn("no-such-model", e.exception.message)
        with self.assertRaises(ProctorError) as e:
            Client(api_key="not-a-key").taskset_id("demo")
        self.assertEqual(e.exception.status, 401, e.exception)
        self.assertTrue(e.exception.code and e.exception.code != "401", e.exception)
        # A launch whose every pair is rejected makes no job.
        with self.assertRaises(ProctorError) as e:
            self.client.run_list(model_ids=["00000000-0000-0000-0000-000000000000"], taskset_id=self.client.taskset_id("demo"))
        self.assertGreaterEqual(e.exception.status, 400, e.exception)

    def test_a_ceiling_is_launched_and_only_a_paused_job_resumes(self):
        # The oracle costs nothing: a job with a ceiling runs to its end, and there is nothing to
        # resume.
        job = self.client.run_list(taskset_id=self.client.taskset_id("demo"), model_ids=[self.client.model_id("oracle")],
                                   name="python client ceiling", max_cost_usd=0.5)
        self.assertEqual(self.client.job(job)["max_cost_usd"], 0.5)
        list(self.client.groups(job))
        with self.assertRaises(ProctorError) as e:
            self.client.resume(job, lift_ceiling=True)
        self.assertEqual(e.exception.status, 409, e.exception)
        self.assertIn("completed", e.exception.message)

    def test_an_export_filter_takes_a_list(self):
        list(self.client.groups(self.job))
        with tempfile.TemporaryDirectory() as d:
            n = self.client.export(self.job, os.path.join(d, "a.jsonl"), status=["error", "completed"])
            none = self.client.export(self.job, os.path.join(d, "b.jsonl"), status=["error", "cancelled"])
        self.assertEqual((n, none), (len(self.client.attempts(self.job)), 0))

    def test_the_build_the_job_ran_replays_it_the_same(self):
        list(self.client.groups(self.job))
        chk = self.client.check(self.client.latest_build("todo"), self.job)
        scored = [a for a in self.client.attempts(self.job) if a.status == "completed"]
        self.assertEqual(chk["status"], "same", chk)
        self.assertEqual(len(chk["attempts"]) + len(chk["not_replayed"]), len(scored), chk)
        self.assertTrue(chk["attempts"] and all(a["outcome"] == "same" for a in chk["attempts"]), chk)
        self.assertEqual({n["reason"] for n in chk["not_replayed"]}, {"other_environment"}, chk)

    def test_a_certification_comes_back_with_its_figures(self):
        cert = self.client.certify(self.client.latest_build("game2048"), self.client.taskset_id("demo"), k=2)
        self.assertEqual(cert["status"], "passed", cert)
        self.assertEqual([(t["task_name"], t["oracle_passes"], t["flags"]) for t in cert["tasks"]], [("2048-reach-16", 2, [])])
        with self.assertRaises(ProctorError) as e:
            self.client.check(self.client.latest_build("todo"), "00000000-0000-0000-0000-000000000000")
        self.assertEqual(e.exception.status, 422, e.exception)


if __name__ == "__main__":
    unittest.main()
