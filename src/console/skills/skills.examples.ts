import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of skills (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const skillsExamples: Partial<ContractExamples> = {
  "shapes": {
    "Skill": {
      "name": "changelog",
      "description": "Writes a changelog entry from the commits since the last tag.",
      "size_bytes": 182,
      "revision": 1,
      "resources": {
        "template.md": "## [Unreleased]\n"
      },
      "created_at": "2026-11-22T20:55:00.353Z",
      "updated_at": "2026-11-22T20:55:00.353Z",
      "body": "---\nname: changelog\ndescription: Writes a changelog entry from the commits since the last tag.\n---\n\nRead `git log` since the last tag and write CHANGELOG.md entries.\n"
    },
    "SkillPut": {
      "body": "---\nname: changelog\ndescription: Writes a changelog entry from the commits since the last tag.\n---\n\nRead `git log` since the last tag and write CHANGELOG.md entries.\n",
      "resources": {
        "template.md": "## [Unreleased]\n"
      }
    },
    "SkillSummary": {
      "name": "changelog",
      "description": "Writes a changelog entry from the commits since the last tag.",
      "size_bytes": 182,
      "revision": 1,
      "files": [
        "template.md"
      ],
      "updated_at": "2026-11-22T20:55:00.353Z"
    }
  },
  "params": {
    "skills.name": "changelog"
  }
};
