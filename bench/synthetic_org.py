"""A deterministic synthetic organisation for the benchmarks (seeded; same seed, same org).

1,000 members by default with varied roles, teams, `owns`, escalation paths, statuses and a
supervisory tree; ~50 channels (one per team plus small project rooms); agent seats, one of
which has no supervisor (so an unowned scope is `unroutable` for it). Everything is built
through the contracts (`Org.model_validate`), exactly like a loaded org file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from contracts import Org

FIRST = [
    "Ada",
    "Ben",
    "Chloe",
    "Devi",
    "Emil",
    "Faye",
    "Gus",
    "Hana",
    "Ivan",
    "Jo",
    "Kai",
    "Lea",
    "Mo",
    "Nia",
    "Omar",
    "Pia",
    "Quinn",
    "Rui",
    "Sara",
    "Tom",
    "Uma",
    "Vik",
    "Wen",
    "Xia",
    "Yusuf",
    "Zoe",
]
LAST = [
    "Okafor",
    "Lindqvist",
    "Tanaka",
    "Raman",
    "Novak",
    "Brennan",
    "Moreau",
    "Kim",
    "Petrov",
    "Adeyemi",
    "Sorensen",
    "Fontaine",
    "Haddad",
    "Ivanova",
    "Mendes",
    "Oduya",
    "Park",
    "Quispe",
    "Rossi",
    "Schmidt",
    "Nakamura",
    "Varga",
    "Walsh",
    "Zhou",
]
# Role and team words are kept apart from the `owns` vocabulary below, so a scope made of
# them reaches the expertise rung and not the ownership rung.
ROLES = [
    "Software Engineer",
    "Senior Software Engineer",
    "Staff Engineer",
    "Product Manager",
    "Product Designer",
    "Data Scientist",
    "Site Reliability Engineer",
    "Security Engineer",
    "Finance Analyst",
    "Legal Counsel",
    "Recruiter",
    "Support Specialist",
    "Marketing Manager",
    "Sales Executive",
    "Engineering Manager",
    "Technical Writer",
    "Quality Assurance Engineer",
    "Solutions Architect",
]
TEAMS = [
    "Platform",
    "Growth",
    "Payments",
    "Identity",
    "Search",
    "Mobile",
    "Insights",
    "Security",
    "Finance",
    "Legal",
    "People",
    "Support",
    "Marketing",
    "Sales",
    "Infrastructure",
]
TAGLINES = [
    "accessibility and design systems",
    "performance tuning",
    "localisation",
    "incident command",
    "interviewing and onboarding",
    "contract negotiation",
    "technical documentation",
    "capacity planning",
]
QUALIFIERS = [
    "billing",
    "payments",
    "search",
    "identity",
    "mobile",
    "email",
    "warehouse",
    "ledger",
    "invoice",
    "catalog",
    "checkout",
    "analytics",
    "kafka",
    "postgres",
    "redis",
    "frontend",
    "gateway",
    "pricing",
    "fraud",
    "payroll",
]
NOUNS = [
    "database",
    "service",
    "pipeline",
    "dashboard",
    "api",
    "cluster",
    "migration",
    "budget",
    "contract",
    "runbook",
]
OWNED = [f"{q} {n}" for q in QUALIFIERS for n in NOUNS]
ESCALATIONS = [
    "production incidents and deploys",
    "security incidents",
    "payroll questions",
    "vendor disputes",
    "outage communications",
    "gdpr requests",
]
STATUSES = (
    ["active"] * 80
    + ["busy"] * 6
    + ["online"] * 6
    + ["archived"] * 4
    + ["away"] * 2
    + ["offline"] * 2
)
ENGAGEABLE = frozenset({"active", "online", "busy"})
# Words nobody owns, no role or team contains, and no escalation path names.
NOBODY_WORDS = [
    "quarterly offsite catering",
    "plant watering rota",
    "parking permits renewal",
    "holiday party playlist",
    "whiteboard markers order",
]
EXPERTISE_SCOPES = [
    "need a recruiter",
    "legal counsel opinion",
    "product designer input",
    "technical writer review of copy",
    "solutions architect sizing",
    "quality assurance sign",
    "data scientist estimate",
    "marketing manager wording",
    "people team policy",
]


@dataclass(frozen=True)
class SyntheticOrg:
    org: Org
    seats: tuple[str, ...]  # seats with a supervisor
    orphan_seat: str  # a seat with no supervisor anywhere
    engageable: tuple[str, ...]
    archived: tuple[str, ...]


def build_org(
    n_members: int = 1000, n_channels: int = 50, seed: int = 7, n_seats: int = 20
) -> SyntheticOrg:
    """`n_members` members in all, `n_seats` of them seats with a supervisor, plus the orphan
    seat. The same seed and sizes give the same org; the default sizes are every bench's."""
    rng = random.Random(seed)
    people = n_members - n_seats - 1
    members: list[dict[str, object]] = []
    for i in range(people):
        mid = f"m{i:04d}"
        team = rng.choice(TEAMS)
        member: dict[str, object] = {
            "id": mid,
            "displayName": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "slug": mid,
            "roleTitle": rng.choice(ROLES),
            "teamName": team,
            "status": rng.choice(STATUSES) if i >= 10 else "active",
            "owns": rng.sample(OWNED, k=rng.choice([0, 0, 1, 1, 1, 2, 3])),
        }
        if rng.random() < 0.1:
            member["escalationPath"] = rng.choice(ESCALATIONS)
        if rng.random() < 0.2:
            member["tagline"] = rng.choice(TAGLINES)
        if i >= 10:  # 0..9 lead; 10..199 report to a lead or manager; the rest to a manager
            member["supervisorId"] = f"m{rng.randrange(0, min(i, 10 if i < 60 else 200)):04d}"
        members.append(member)
    seats = [f"seat{j:02d}" for j in range(n_seats)]
    for j, sid in enumerate(seats):
        members.append(
            {
                "id": sid,
                "displayName": f"Seat {j}",
                "slug": sid,
                "roleTitle": "Agent seat",
                "teamName": rng.choice(TEAMS),
                "supervisorId": f"m{rng.randrange(10, 200):04d}",
            }
        )
    orphan = "seat-orphan"
    members.append(
        {
            "id": orphan,
            "displayName": "Orphan seat",
            "slug": orphan,
            "roleTitle": "Agent seat",
            "teamName": "Operations",
        }
    )

    by_team: dict[str, list[str]] = {}
    for m in members[:people]:
        by_team.setdefault(str(m["teamName"]), []).append(str(m["id"]))
    channels: list[dict[str, object]] = []
    for t, team in enumerate(TEAMS[: min(len(TEAMS), n_channels)]):
        roster = by_team.get(team, []) + rng.sample(seats, k=4)
        channels.append(
            {"id": f"C-T{t:02d}", "kind": "PUBLIC", "name": team.lower(), "memberIds": roster}
        )
    everyone = [str(m["id"]) for m in members[:people]]
    for c in range(len(channels), n_channels):
        roster = rng.sample(everyone, k=rng.randint(3, 12)) + rng.sample(seats, k=2)
        channels.append(
            {
                "id": f"C-P{c:02d}",
                "kind": rng.choice(["PUBLIC", "PRIVATE"]),
                "name": f"project-{c:02d}",
                "memberIds": roster,
            }
        )
    org = Org.model_validate(
        {
            "members": members,
            "channels": channels,
            "seats": [{"memberId": s} for s in [*seats, orphan]],
        }
    )
    statuses = {str(m["id"]): str(m.get("status", "active")) for m in members}
    return SyntheticOrg(
        org=org,
        seats=tuple(seats),
        orphan_seat=orphan,
        engageable=tuple(m for m in everyone if statuses[m] in ENGAGEABLE),
        archived=tuple(m for m in everyone if statuses[m] == "archived"),
    )
