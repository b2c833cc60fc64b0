// GitLab's wire objects (REST answers and webhook payloads) built from the stand-in's state.
// Fields without a model get neutral values later (Schemas#fill); everything here is explicit.
'use strict';

const { iso, hookTime, stableId } = require('./util');

// A job's seconds running and in the queue, as webhooks give them: null until it has finished
// (running) or started (queued).
function hookSeconds(j) {
  return {
    running: j.startedAt && j.finishedAt ? (j.finishedAt - j.startedAt) / 1000 : null,
    queued: j.startedAt ? (j.startedAt - j.createdAt) / 1000 : null,
  };
}

// The runner of a job in webhooks: none while the job is pending.
function hookRunner(j) {
  return j.status === 'pending' ? null : { id: 7001, description: 'shared-runner-1', runner_type: 'instance_type', active: true, is_shared: true, tags: [] };
}

class Render {
  constructor({ webUrl }) {
    this.webUrl = webUrl.replace(/\/+$/, '');
  }

  user(username) {
    const name = username
      .split(/[-_.]/)
      .filter(Boolean)
      .map((w) => w[0].toUpperCase() + w.slice(1))
      .join(' ');
    const id = stableId(`user:${username}`, 90000);
    return {
      id,
      username,
      name: name || username,
      state: 'active',
      locked: false,
      avatar_url: `https://www.gravatar.com/avatar/${id.toString(16).padStart(8, '0')}?s=80&d=identicon`,
      web_url: `${this.webUrl}/${username}`,
    };
  }

  // A project member as `GET /projects/:id/members/all/:user_id` answers.
  member(username, level) {
    const u = this.user(username);
    return { id: u.id, username: u.username, name: u.name, state: u.state, locked: false, avatar_url: u.avatar_url, web_url: u.web_url, access_level: level, created_at: '2024-01-01T00:00:00.000Z', created_by: null, expires_at: null, membership_state: 'active' };
  }

  hookUser(username) {
    const u = this.user(username);
    return { id: u.id, name: u.name, username: u.username, state: u.state, avatar_url: u.avatar_url, web_url: u.web_url, email: '[REDACTED]' };
  }

  email(username) {
    return `${username}@users.noreply.gitlab.example`;
  }

  projectUrl(p) {
    return `${this.webUrl}/${p.path}`;
  }

  namespace(p) {
    return {
      id: stableId(`ns:${p.namespace}`, 90000),
      name: p.namespace,
      path: p.namespace,
      kind: 'group',
      full_path: p.namespace,
      parent_id: null,
      avatar_url: null,
      web_url: `${this.webUrl}/groups/${p.namespace}`,
    };
  }

  project(p) {
    const web = this.projectUrl(p);
    const api = `${p.apiBase}/projects/${p.id}`;
    const host = new URL(this.webUrl).host;
    return {
      id: p.id,
      description: `${p.name} (GitLab stand-in)`,
      name: p.name,
      name_with_namespace: `${p.namespace} / ${p.name}`,
      path: p.name,
      path_with_namespace: p.path,
      created_at: iso(p.createdAt),
      updated_at: iso(p.createdAt),
      last_activity_at: iso(p.lastActivity),
      default_branch: p.defaultBranch,
      tag_list: [],
      topics: [],
      ssh_url_to_repo: `git@${host}:${p.path}.git`,
      http_url_to_repo: `${web}.git`,
      web_url: web,
      readme_url: `${web}/-/blob/${p.defaultBranch}/README.md`,
      avatar_url: null,
      forks_count: 0,
      star_count: 0,
      namespace: this.namespace(p),
      visibility: 'private',
      archived: false,
      empty_repo: false,
      issues_enabled: true,
      merge_requests_enabled: true,
      jobs_enabled: true,
      wiki_enabled: false,
      snippets_enabled: false,
      packages_enabled: false,
      container_registry_enabled: false,
      creator_id: this.user(p.owner).id,
      open_issues_count: p.issues.filter((i) => i.state === 'opened').length,
      merge_method: 'merge',
      squash_option: 'default_off',
      only_allow_merge_if_pipeline_succeeds: p.settings.onlyAllowMergeIfPipelineSucceeds,
      only_allow_merge_if_all_discussions_are_resolved: false,
      allow_merge_on_skipped_pipeline: false,
      remove_source_branch_after_merge: true,
      approvals_before_merge: p.settings.approvalsRequired,
      permissions: { project_access: { access_level: 40, notification_level: 3 }, group_access: null },
      _links: {
        self: api,
        issues: `${api}/issues`,
        merge_requests: `${api}/merge_requests`,
        repo_branches: `${api}/repository/branches`,
        labels: `${api}/labels`,
        events: `${api}/events`,
        members: `${api}/members`,
        cluster_agents: `${api}/cluster_agents`,
      },
    };
  }

  hookProject(p) {
    const web = this.projectUrl(p);
    const host = new URL(this.webUrl).host;
    return {
      id: p.id,
      name: p.name,
      description: `${p.name} (GitLab stand-in)`,
      web_url: web,
      avatar_url: null,
      git_ssh_url: `git@${host}:${p.path}.git`,
      git_http_url: `${web}.git`,
      namespace: p.namespace,
      visibility_level: 0,
      path_with_namespace: p.path,
      default_branch: p.defaultBranch,
      ci_config_path: '',
      homepage: web,
      url: `git@${host}:${p.path}.git`,
      ssh_url: `git@${host}:${p.path}.git`,
      http_url: `${web}.git`,
    };
  }

  repository(p) {
    const h = this.hookProject(p);
    return { name: p.name, url: h.url, description: h.description, homepage: h.homepage, git_http_url: h.git_http_url, git_ssh_url: h.git_ssh_url, visibility_level: 0 };
  }

  mrUrl(p, mr) {
    return `${this.projectUrl(p)}/-/merge_requests/${mr.iid}`;
  }

  labels(names) {
    return names;
  }

  // The fields a merge request and its approvals both begin with.
  mrHead(p, mr) {
    return {
      id: mr.id,
      iid: mr.iid,
      project_id: p.id,
      title: mr.title,
      description: mr.description,
      state: mr.state,
      created_at: iso(mr.createdAt),
      updated_at: iso(mr.updatedAt),
    };
  }

  // `v` is the live view of a merge request (see StandIn#mrView).
  mergeRequest(p, v, { expanded = false } = {}) {
    const mr = v.mr;
    const user = (u) => (u ? this.user(u) : null);
    const reviewers = [...mr.reviewers.keys()].map((u) => this.user(u));
    const out = {
      ...this.mrHead(p, mr),
      merged_by: user(mr.mergedBy),
      merge_user: user(mr.mergedBy),
      merged_at: iso(mr.mergedAt),
      closed_by: user(mr.closedBy),
      closed_at: iso(mr.closedAt),
      prepared_at: iso(mr.createdAt),
      target_branch: mr.targetBranch,
      source_branch: mr.sourceBranch,
      user_notes_count: mr.discussions.reduce((n, d) => n + d.notes.length, 0),
      upvotes: 0,
      downvotes: 0,
      author: this.user(mr.author),
      assignees: [],
      assignee: null,
      reviewers,
      source_project_id: p.id,
      target_project_id: p.id,
      labels: mr.labels,
      draft: mr.draft,
      work_in_progress: mr.draft,
      milestone: null,
      merge_when_pipeline_succeeds: false,
      merge_status: v.mergeStatus,
      detailed_merge_status: v.detailed,
      sha: v.head,
      merge_commit_sha: mr.mergeCommitSha,
      squash_commit_sha: mr.squashCommitSha,
      discussion_locked: null,
      should_remove_source_branch: mr.shouldRemoveSourceBranch,
      force_remove_source_branch: mr.forceRemoveSourceBranch,
      prepared: true,
      reference: `!${mr.iid}`,
      references: { short: `!${mr.iid}`, relative: `!${mr.iid}`, full: `${p.path}!${mr.iid}` },
      web_url: this.mrUrl(p, mr),
      time_stats: { time_estimate: 0, total_time_spent: 0, human_time_estimate: null, human_total_time_spent: null },
      squash: mr.squash,
      squash_on_merge: mr.squash,
      task_completion_status: { count: 0, completed_count: 0 },
      has_conflicts: v.hasConflicts,
      blocking_discussions_resolved: true,
      approvals_before_merge: null,
    };
    if (!expanded) return out;
    const pipe = v.pipeline ? this.pipeline(p, v.pipeline) : null;
    return {
      ...out,
      subscribed: true,
      changes_count: String(v.changedPaths.length),
      latest_build_started_at: v.pipeline ? iso(v.pipeline.startedAt) : null,
      latest_build_finished_at: v.pipeline ? iso(v.pipeline.finishedAt) : null,
      first_deployed_to_production_at: null,
      pipeline: pipe,
      head_pipeline: pipe ? { ...pipe, before_sha: '0'.repeat(40), tag: false, yaml_errors: null, user: this.user(v.pipeline.user), started_at: iso(v.pipeline.startedAt), finished_at: iso(v.pipeline.finishedAt), committed_at: null, duration: v.pipeline.duration, queued_duration: 0, coverage: null, detailed_status: this.detailedStatus(p, v.pipeline) } : null,
      diff_refs: { base_sha: v.base, head_sha: v.head, start_sha: v.targetHead },
      merge_error: null,
      first_contribution: false,
      user: { can_merge: true },
      rebase_in_progress: false,
      diverged_commits_count: 0,
    };
  }

  // `viewer` is the user asking; `canApprove` whether GitLab would let them approve now.
  approvals(p, v, { viewer, canApprove }) {
    const mr = v.mr;
    const approvedBy = [...mr.approvals.keys()].map((u) => ({ user: this.user(u) }));
    return {
      ...this.mrHead(p, mr),
      merge_status: v.mergeStatus,
      approved: v.approvalsLeft === 0,
      approvals_required: v.approvalsRequired,
      approvals_left: v.approvalsLeft,
      require_password_to_approve: false,
      approved_by: approvedBy,
      suggested_approvers: [],
      approvers: [],
      approver_groups: [],
      user_has_approved: mr.approvals.has(viewer),
      user_can_approve: canApprove,
      approval_rules_left: [],
      has_approval_rules: false,
      merge_request_approvers_available: true,
      multiple_approval_rules_available: true,
      invalid_approvers_rules: [],
    };
  }

  // GET /projects/:id/approvals. The stand-in keeps approvals when commits are pushed, so
  // reset_approvals_on_push is false here (GitLab's default is true).
  approvalSettings(p) {
    return {
      approvers: [],
      approver_groups: [],
      approvals_before_merge: p.settings.approvalsRequired,
      reset_approvals_on_push: false,
      selective_code_owner_removals: false,
      disable_overriding_approvers_per_merge_request: false,
      merge_requests_author_approval: p.settings.mergeRequestsAuthorApproval,
      merge_requests_disable_committers_approval: false,
      require_password_to_approve: false,
      require_reauthentication_to_approve: false,
    };
  }

  // GET /user: the user the token belongs to, as GitLab shows a user their own account.
  currentUser(username) {
    const u = this.user(username);
    const created = '2024-01-02T03:04:05.000Z';
    return {
      ...u,
      created_at: created,
      bio: '',
      location: '',
      public_email: null,
      skype: '',
      linkedin: '',
      twitter: '',
      discord: '',
      website_url: '',
      organization: '',
      job_title: '',
      pronouns: null,
      bot: false,
      work_information: null,
      local_time: null,
      last_sign_in_at: created,
      confirmed_at: created,
      last_activity_on: new Date().toISOString().slice(0, 10),
      email: this.email(username),
      theme_id: 1,
      color_scheme_id: 1,
      projects_limit: 100000,
      current_sign_in_at: created,
      identities: [],
      can_create_group: true,
      can_create_project: true,
      two_factor_enabled: false,
      external: false,
      private_profile: false,
      commit_email: this.email(username),
      namespace_id: stableId(`ns:${username}`, 90000),
      created_by: null,
    };
  }

  reviewers(p, mr) {
    return [...mr.reviewers.entries()].map(([u, r]) => ({ user: this.user(u), state: r.state, created_at: iso(r.createdAt) }));
  }

  note(p, mr, d, n) {
    const out = {
      id: n.id,
      type: n.type,
      body: n.body,
      attachment: null,
      author: this.user(n.author),
      created_at: iso(n.createdAt),
      updated_at: iso(n.updatedAt),
      system: false,
      noteable_id: mr.id,
      noteable_type: 'MergeRequest',
      project_id: p.id,
      commit_id: null,
      resolvable: n.type === 'DiffNote' || n.type === 'DiscussionNote',
      resolved: !!n.resolved,
      resolved_by: n.resolved && n.resolvedBy ? this.user(n.resolvedBy) : null,
      resolved_at: n.resolved && n.resolvedAt ? iso(n.resolvedAt) : null,
      confidential: false,
      internal: false,
      imported: false,
      imported_from: 'none',
      noteable_iid: mr.iid,
      commands_changes: {},
    };
    if (n.position) out.position = { ...n.position, line_range: null };
    return out;
  }

  discussion(p, mr, d) {
    return { id: d.id, individual_note: d.individual, notes: d.notes.map((n) => this.note(p, mr, d, n)) };
  }

  detailedStatus(p, pl) {
    const label = { success: 'passed', failed: 'failed', running: 'running', pending: 'pending', canceled: 'canceled', created: 'created', skipped: 'skipped' }[pl.status] || pl.status;
    return {
      icon: `status_${pl.status}`,
      text: label,
      label,
      group: pl.status,
      tooltip: label,
      has_details: true,
      details_path: `/${p.path}/-/pipelines/${pl.id}`,
      illustration: null,
      favicon: `/assets/ci_favicons/favicon_status_${pl.status}.png`,
    };
  }

  pipelineUrl(p, pl) {
    return `${this.projectUrl(p)}/-/pipelines/${pl.id}`;
  }

  pipeline(p, pl) {
    return {
      id: pl.id,
      iid: pl.iid,
      project_id: p.id,
      sha: pl.sha,
      ref: pl.ref,
      status: pl.status,
      source: pl.source,
      created_at: iso(pl.createdAt),
      updated_at: iso(pl.updatedAt),
      web_url: this.pipelineUrl(p, pl),
      name: null,
    };
  }

  jobUrl(p, j) {
    return `${this.projectUrl(p)}/-/jobs/${j.id}`;
  }

  runner() {
    return { id: 7001, description: 'shared-runner-1', ip_address: null, active: true, paused: false, is_shared: true, runner_type: 'instance_type', name: 'gitlab-runner', online: true, status: 'online' };
  }

  commit(p, c) {
    return {
      id: c.sha,
      short_id: c.sha.slice(0, 8),
      title: c.message.split('\n')[0],
      message: c.message,
      author_name: c.author.name,
      author_email: c.author.email,
      authored_date: c.author.date,
      committer_name: c.committer.name,
      committer_email: c.committer.email,
      committed_date: c.committer.date,
      created_at: c.committer.date,
      parent_ids: c.parents,
      web_url: `${this.projectUrl(p)}/-/commit/${c.sha}`,
    };
  }

  job(p, j, pl, commit) {
    const out = {
      id: j.id,
      name: j.name,
      stage: j.stage,
      status: j.status,
      ref: pl.ref,
      tag: false,
      coverage: null,
      allow_failure: j.allowFailure,
      created_at: iso(j.createdAt),
      started_at: iso(j.startedAt),
      finished_at: iso(j.finishedAt),
      erased_at: null,
      duration: j.startedAt ? ((j.finishedAt || Date.now()) - j.startedAt) / 1000 : null,
      queued_duration: j.startedAt ? (j.startedAt - j.createdAt) / 1000 : (Date.now() - j.createdAt) / 1000,
      user: this.user(pl.user),
      commit: this.commit(p, commit),
      pipeline: this.pipeline(p, pl),
      web_url: this.jobUrl(p, j),
      artifacts: [],
      artifacts_file: { filename: 'artifacts.zip', size: 0 },
      artifacts_expire_at: null,
      runner: j.status === 'pending' ? null : this.runner(),
      tag_list: [],
      archived: false,
      retried: j.retried,
    };
    if (j.status === 'failed') out.failure_reason = 'script_failure';
    return out;
  }

  issueUrl(p, i) {
    return `${this.projectUrl(p)}/-/issues/${i.iid}`;
  }

  // One resource label event of issue `i`.
  labelEvent(p, i, e) {
    const { id, username, name, state, avatar_url, web_url } = this.user(e.user);
    const label = this.hookLabel(p, e.label);
    return {
      id: e.id,
      user: { id, username, name, state, avatar_url, web_url },
      created_at: iso(e.at),
      resource_type: 'Issue',
      resource_id: i.id,
      label: { id: label.id, name: e.label, color: label.color, text_color: '#FFFFFF', description: null, description_html: '', open_issues_count: 0, closed_issues_count: 0, open_merge_requests_count: 0, subscribed: false, priority: 0, is_project_label: true },
      action: e.action,
    };
  }

  issue(p, i) {
    const api = `${p.apiBase}/projects/${i.projectId}`;
    return {
      id: i.id,
      iid: i.iid,
      project_id: i.projectId,
      title: i.title,
      description: i.description,
      state: i.state,
      created_at: iso(i.createdAt),
      updated_at: iso(i.updatedAt),
      closed_at: iso(i.closedAt),
      closed_by: i.closedBy ? this.user(i.closedBy) : null,
      labels: i.labels,
      milestone: null,
      assignees: [],
      assignee: null,
      author: this.user(i.author),
      type: 'ISSUE',
      issue_type: 'issue',
      user_notes_count: 0,
      merge_requests_count: 0,
      upvotes: 0,
      downvotes: 0,
      due_date: null,
      confidential: false,
      discussion_locked: null,
      web_url: i.webUrl,
      time_stats: { time_estimate: 0, total_time_spent: 0, human_time_estimate: null, human_total_time_spent: null },
      task_completion_status: { count: 0, completed_count: 0 },
      has_tasks: false,
      task_status: '0 of 0 checklist items completed',
      references: { short: `#${i.iid}`, relative: `#${i.iid}`, full: `${i.projectPath}#${i.iid}` },
      moved_to_id: i.movedToId,
      service_desk_reply_to: null,
      subscribed: true,
      _links: { self: `${api}/issues/${i.iid}`, notes: `${api}/issues/${i.iid}/notes`, award_emoji: `${api}/issues/${i.iid}/award_emoji`, project: api, closed_as_duplicate_of: null },
    };
  }

  // --- webhook payloads ---

  lastCommit(p, c) {
    return { id: c.sha, message: `${c.message}\n`, title: c.message.split('\n')[0], timestamp: c.committer.date, url: `${this.projectUrl(p)}/-/commit/${c.sha}`, author: { name: c.author.name, email: c.author.email } };
  }

  hookMergeRequestAttributes(p, v, commit) {
    const mr = v.mr;
    const stateId = { opened: 1, closed: 2, merged: 3, locked: 4 }[mr.state];
    return {
      id: mr.id,
      iid: mr.iid,
      target_branch: mr.targetBranch,
      source_branch: mr.sourceBranch,
      source_project_id: p.id,
      target_project_id: p.id,
      author_id: this.user(mr.author).id,
      assignee_id: null,
      assignee_ids: [],
      reviewer_ids: [...mr.reviewers.keys()].map((u) => this.user(u).id),
      title: mr.title,
      description: mr.description || '',
      created_at: hookTime(mr.createdAt),
      updated_at: hookTime(mr.updatedAt),
      last_edited_at: null,
      last_edited_by_id: null,
      milestone_id: null,
      state_id: stateId,
      state: mr.state,
      blocking_discussions_resolved: true,
      work_in_progress: mr.draft,
      draft: mr.draft,
      first_contribution: false,
      merge_status: v.mergeStatus,
      detailed_merge_status: v.detailed,
      merge_commit_sha: mr.mergeCommitSha,
      merge_user_id: mr.mergedBy ? this.user(mr.mergedBy).id : null,
      merge_when_pipeline_succeeds: false,
      head_pipeline_id: v.pipeline ? v.pipeline.id : null,
      total_time_spent: 0,
      time_estimate: 0,
      time_change: 0,
      human_total_time_spent: null,
      human_time_change: null,
      human_time_estimate: null,
      url: this.mrUrl(p, mr),
      source: this.hookProject(p),
      target: this.hookProject(p),
      last_commit: this.lastCommit(p, commit),
      labels: [],
      squash: mr.squash,
      prepared_at: hookTime(mr.createdAt),
    };
  }

  mergeRequestHook(p, v, commit, action, actor, { changes = {}, oldrev } = {}) {
    const attrs = { ...this.hookMergeRequestAttributes(p, v, commit), action };
    if (oldrev) attrs.oldrev = oldrev;
    return {
      object_kind: 'merge_request',
      event_type: 'merge_request',
      event_name: 'merge_request',
      user: this.hookUser(actor),
      project: this.hookProject(p),
      object_attributes: attrs,
      labels: [],
      changes,
      repository: this.repository(p),
      assignees: [],
      reviewers: [...v.mr.reviewers.keys()].map((u) => this.hookUser(u)),
    };
  }

  hookBuild(p, j, pl) {
    return {
      id: j.id,
      stage: j.stage,
      name: j.name,
      status: j.status,
      created_at: hookTime(j.createdAt),
      started_at: hookTime(j.startedAt),
      finished_at: hookTime(j.finishedAt),
      duration: hookSeconds(j).running,
      queued_duration: hookSeconds(j).queued,
      failure_reason: j.status === 'failed' ? 'script_failure' : null,
      when: 'on_success',
      manual: false,
      allow_failure: j.allowFailure,
      user: this.hookUser(pl.user),
      runner: hookRunner(j),
      artifacts_file: { filename: null, size: null },
      environment: null,
    };
  }

  pipelineHook(p, pl, jobs, commit, mrView) {
    const stages = [...new Set(jobs.map((j) => j.stage))];
    const mr = mrView?.mr;
    return {
      object_kind: 'pipeline',
      object_attributes: {
        id: pl.id,
        iid: pl.iid,
        name: null,
        ref: pl.ref,
        tag: false,
        sha: pl.sha,
        before_sha: '0'.repeat(40),
        source: pl.source,
        status: pl.status,
        detailed_status: this.detailedStatus(p, pl).label,
        stages,
        created_at: hookTime(pl.createdAt),
        finished_at: hookTime(pl.finishedAt),
        duration: pl.duration,
        queued_duration: null,
        variables: [],
        url: this.pipelineUrl(p, pl),
      },
      merge_request: mr
        ? {
            id: mr.id,
            iid: mr.iid,
            title: mr.title,
            source_branch: mr.sourceBranch,
            source_project_id: p.id,
            target_branch: mr.targetBranch,
            target_project_id: p.id,
            state: mr.state,
            merge_status: mrView.mergeStatus,
            detailed_merge_status: mrView.detailed,
            url: this.mrUrl(p, mr),
          }
        : null,
      user: this.hookUser(pl.user),
      project: this.hookProject(p),
      commit: this.lastCommit(p, commit),
      source_pipeline: null,
      builds: jobs.map((j) => this.hookBuild(p, j, pl)),
    };
  }

  jobHook(p, j, pl, commit) {
    return {
      object_kind: 'build',
      ref: pl.ref,
      tag: false,
      before_sha: '0'.repeat(40),
      sha: pl.sha,
      retries_count: j.retryCount || 0,
      build_id: j.id,
      build_name: j.name,
      build_stage: j.stage,
      build_status: j.status,
      build_created_at: hookTime(j.createdAt),
      build_started_at: hookTime(j.startedAt),
      build_finished_at: hookTime(j.finishedAt),
      build_duration: hookSeconds(j).running,
      build_queued_duration: hookSeconds(j).queued,
      build_allow_failure: j.allowFailure,
      build_failure_reason: j.status === 'failed' ? 'script_failure' : 'unknown_failure',
      pipeline_id: pl.id,
      runner: hookRunner(j),
      project_id: p.id,
      project_name: `${p.namespace} / ${p.name}`,
      user: this.hookUser(pl.user),
      commit: {
        id: pl.id,
        name: null,
        sha: pl.sha,
        message: commit.message,
        author_name: commit.author.name,
        author_email: commit.author.email,
        author_url: `mailto:${commit.author.email}`,
        status: pl.status,
        duration: pl.duration,
        started_at: hookTime(pl.startedAt),
        finished_at: hookTime(pl.finishedAt),
      },
      repository: this.repository(p),
      project: this.hookProject(p),
      environment: null,
      source_pipeline: null,
    };
  }

  noteHook(p, v, d, n, commit) {
    const mr = v.mr;
    const attrs = {
      id: n.id,
      note: n.body,
      noteable_type: 'MergeRequest',
      discussion_id: d.id,
      author_id: this.user(n.author).id,
      created_at: hookTime(n.createdAt),
      updated_at: hookTime(n.updatedAt),
      project_id: p.id,
      attachment: null,
      line_code: n.position ? `${n.lineCode}` : null,
      commit_id: '',
      noteable_id: mr.id,
      system: false,
      st_diff: null,
      type: n.type,
      url: `${this.mrUrl(p, mr)}#note_${n.id}`,
      action: 'create',
    };
    if (n.position) attrs.position = { ...n.position, line_range: null };
    else attrs.position = null;
    const mrAttrs = this.hookMergeRequestAttributes(p, v, commit);
    return {
      object_kind: 'note',
      event_type: 'note',
      user: this.hookUser(n.author),
      project_id: p.id,
      project: this.hookProject(p),
      object_attributes: attrs,
      repository: { name: p.name, url: this.hookProject(p).url, description: this.hookProject(p).description, homepage: this.projectUrl(p) },
      merge_request: { ...mrAttrs, position: null, assignee: null },
    };
  }

  issueHook(p, i, action, actor, changes = {}) {
    const stateId = i.state === 'opened' ? 1 : 2;
    return {
      object_kind: 'issue',
      event_type: 'issue',
      user: this.hookUser(actor),
      project: this.hookProject(p),
      object_attributes: {
        id: i.id,
        iid: i.iid,
        title: i.title,
        description: i.description || '',
        assignee_ids: [],
        assignee_id: null,
        author_id: this.user(i.author).id,
        project_id: i.projectId,
        created_at: hookTime(i.createdAt),
        updated_at: hookTime(i.updatedAt),
        updated_by_id: this.user(actor).id,
        last_edited_at: null,
        last_edited_by_id: null,
        relative_position: 0,
        milestone_id: null,
        state_id: stateId,
        state: i.state,
        confidential: false,
        discussion_locked: null,
        due_date: null,
        moved_to_id: i.movedToId,
        duplicated_to_id: null,
        time_estimate: 0,
        total_time_spent: 0,
        time_change: 0,
        human_total_time_spent: null,
        human_time_estimate: null,
        human_time_change: null,
        weight: null,
        health_status: null,
        type: 'Issue',
        url: i.webUrl,
        action,
        severity: 'unknown',
        escalation_status: null,
        escalation_policy: null,
        labels: i.labels.map((l) => this.hookLabel(p, l)),
        closed_at: hookTime(i.closedAt),
      },
      labels: i.labels.map((l) => this.hookLabel(p, l)),
      changes,
      repository: { name: p.name, url: this.hookProject(p).url, description: this.hookProject(p).description, homepage: this.projectUrl(p) },
      assignees: [],
      assignee: null,
    };
  }

  hookLabel(p, name) {
    return { id: stableId(`label:${p.path}:${name}`, 90000), title: name, color: '#428BCA', project_id: p.id, created_at: hookTime(p.createdAt), updated_at: hookTime(p.createdAt), template: false, description: null, type: 'ProjectLabel', group_id: null };
  }

  pushHook(p, { ref, before, after, commits, pusher, total }) {
    const u = this.hookUser(pusher);
    return {
      object_kind: 'push',
      event_name: 'push',
      before,
      after,
      ref,
      ref_protected: ref === `refs/heads/${p.defaultBranch}`,
      checkout_sha: /^0+$/.test(after) ? null : after,
      message: null,
      user_id: u.id,
      user_name: u.name,
      user_username: u.username,
      user_email: '',
      user_avatar: u.avatar_url,
      project_id: p.id,
      project: this.hookProject(p),
      commits: commits.map((c) => ({
        id: c.sha,
        message: `${c.message}\n`,
        title: c.message.split('\n')[0],
        timestamp: c.committer.date,
        url: `${this.projectUrl(p)}/-/commit/${c.sha}`,
        author: { name: c.author.name, email: c.author.email },
        added: c.files.added,
        modified: c.files.modified,
        removed: c.files.removed,
      })),
      total_commits_count: total,
      push_options: {},
      repository: this.repository(p),
    };
  }
}

module.exports = { Render };
