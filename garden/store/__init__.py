"""The store on disk: its durable part (stories, cases, attachments) and its derived part
(the garden home), the integrity rules `garden doctor` checks, and backup and restore."""
