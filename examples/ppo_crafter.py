#!/usr/bin/env python3
"""PPO on Crafter with vlmcrafter: one file, in the style of CleanRL's ``ppo_atari.py``.

Trains a small CNN on the 64x64 RGB frames of ``gymnasium.make_vec("vlmcrafter/Crafter-v1",
num_envs=N)`` (the native vector env), writes crafter's ``stats.jsonl`` (one line per finished
episode, the lines crafter's Recorder writes) and at the end scores the run as the Crafter paper
does: per-achievement success rates over all training episodes, and their geometric mean
``exp(mean(log(1 + p))) - 1``.

    pip install torch ./target/wheels/vlmcrafter-*.whl gymnasium   # see docs/PYTHON.md
    python examples/ppo_crafter.py --total-timesteps 1000000 --logdir runs/ppo

Hyperparameters are CleanRL's ``ppo_atari.py`` defaults (Huang et al., "The 37 implementation
details of PPO"), unchanged; the network is CleanRL's Nature-CNN with the input adapted from 4
stacked 84x84 grey frames to one 64x64 RGB frame. ``--help`` lists them.

Autoreset: the env's default mode, gymnasium's NEXT_STEP. The step after an episode ends
resets that env and ignores its action; those "autoreset steps" are left out of the loss, and
GAE does not bootstrap across an episode's end (as CleanRL, truncation is treated as an end;
crafter truncates only at 10000 steps).

Printed and written to ``LOGDIR/summary.json``: wall time, and steps per second split into env
time (``envs.step``/``reset``) and learner time (the policy's forward passes while collecting,
plus GAE and the PPO updates).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import time
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical

import vlmcrafter
from vlmcrafter import score
from vlmcrafter.recorder import VectorRecorder

ENV_ID = "vlmcrafter/Crafter-v1"


@dataclasses.dataclass
class Args:
    exp_name: str = "ppo_crafter"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment (torch, numpy, and the envs' seeds seed..seed+N-1)"""
    torch_deterministic: bool = True
    """torch.backends.cudnn.deterministic"""
    cuda: bool = True
    """use CUDA when torch has it"""
    threads: int = 0
    """torch's CPU threads (0: torch's default)"""
    logdir: str = "runs/ppo_crafter"
    """where stats.jsonl, progress.jsonl and summary.json go"""
    save_model: bool = False
    """save the agent's weights to LOGDIR/agent.pt at the end"""

    total_timesteps: int = 1_000_000
    """total environment steps (the Crafter benchmark's budget is 1M)"""
    max_wall_seconds: float = 0.0
    """stop after this many seconds (0: no limit); the learning-rate schedule stays that of
    --total-timesteps, so a stopped run is the beginning of the full run"""
    learning_rate: float = 2.5e-4
    """the optimizer's learning rate"""
    num_envs: int = 8
    """parallel envs (one native vector env)"""
    episode_length: int = 10000
    """crafter's ``length``: an episode is truncated at this many steps (crafter's default)"""
    num_steps: int = 128
    """steps per env per rollout"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0"""
    gamma: float = 0.99
    """discount"""
    gae_lambda: float = 0.95
    """GAE's lambda"""
    num_minibatches: int = 4
    """minibatches per epoch"""
    update_epochs: int = 4
    """epochs per update"""
    norm_adv: bool = True
    """normalise advantages per minibatch"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss"""
    ent_coef: float = 0.01
    """entropy coefficient"""
    vf_coef: float = 0.5
    """value-loss coefficient"""
    max_grad_norm: float = 0.5
    """gradient clipping norm"""
    target_kl: Optional[float] = None
    """stop an update early past this approximate KL (None: never)"""


def parse_args() -> Args:
    """Args from the command line: every field as ``--field-name`` (booleans take true/false)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)

    def boolean(text: str) -> bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise argparse.ArgumentTypeError(f"{text!r} is not a boolean: use true or false")

    def optional_float(text: str) -> Optional[float]:
        return None if text.lower() == "none" else float(text)

    for field in dataclasses.fields(Args):
        flag = "--" + field.name.replace("_", "-")
        kind = {"bool": boolean, "int": int, "float": float, "str": str, "Optional[float]": optional_float}[str(field.type)]
        nargs = "?" if kind is boolean else None
        extra = {"const": True} if kind is boolean else {}
        parser.add_argument(flag, type=kind, default=field.default, nargs=nargs, help=" ", **extra)
    return Args(**vars(parser.parse_args()))


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's Nature-CNN actor-critic, on uint8 (B, H, W, 3) frames."""

    def __init__(self, height: int, width: int, n_actions: int):
        super().__init__()
        conv = nn.Sequential(
            layer_init(nn.Conv2d(3, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            features = conv(torch.zeros(1, 3, height, width)).shape[1]  # 1024 at 64x64
        self.network = nn.Sequential(conv, layer_init(nn.Linear(features, 512)), nn.ReLU())
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x.permute(0, 3, 1, 2).float() / 255.0)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(self.hidden(x))

    def get_action_and_value(self, x: torch.Tensor, action: Optional[torch.Tensor] = None):
        hidden = self.hidden(x)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


class EpisodeReturns:
    """Returns of finished episodes, for the progress line (``stats.jsonl`` is the recorder's)."""

    def __init__(self, num_envs: int):
        self.running = np.zeros(num_envs, np.float64)
        self.recent: list = []
        self.episodes = 0

    def step(self, rewards, ended, counted) -> None:
        self.running[counted] += rewards[counted]
        for i in np.flatnonzero(ended):
            self.recent = (self.recent + [float(self.running[i])])[-100:]
            self.running[i] = 0.0
            self.episodes += 1


def main() -> None:
    args = parse_args()
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    os.makedirs(args.logdir, exist_ok=True)
    stats_path = os.path.join(args.logdir, "stats.jsonl")
    if os.path.exists(stats_path):
        raise SystemExit(f"{stats_path} exists (an earlier run's episodes): give a new --logdir, so the score is this run's")
    with open(os.path.join(args.logdir, "args.json"), "w") as f:
        json.dump(dataclasses.asdict(args), f, indent=1)

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # The native vector env (vlmcrafter's vector entry point), gymnasium's NEXT_STEP autoreset;
    # the recorder appends crafter's stats line of every finished episode to LOGDIR/stats.jsonl.
    # copy=False: the env's one frame buffer; the rollout storage (obs[step]) copies each frame.
    envs = VectorRecorder(gym.make_vec(ENV_ID, num_envs=args.num_envs, length=args.episode_length, copy=False),
                          args.logdir)
    height, width, _ = envs.single_observation_space.shape
    n_actions = int(envs.single_action_space.n)
    agent = Agent(height, width, n_actions).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    finished = EpisodeReturns(args.num_envs)
    progress = open(os.path.join(args.logdir, "progress.jsonl"), "w")
    print(
        f"vlmcrafter {vlmcrafter.__version__}, torch {torch.__version__} on {device} "
        f"({torch.get_num_threads()} threads), {type(envs).__name__} x{args.num_envs}, "
        f"{args.total_timesteps} steps in {num_iterations} iterations of {batch_size}",
        flush=True,
    )

    obs = torch.zeros((args.num_steps, args.num_envs, height, width, 3), dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    counted = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool)

    env_time = 0.0  # envs.reset / envs.step
    act_time = 0.0  # the policy's forward passes while collecting
    update_time = 0.0  # GAE and the PPO epochs
    start = time.perf_counter()
    t = time.perf_counter()
    next_obs_np, _ = envs.reset(seed=args.seed)
    env_time += time.perf_counter() - t
    next_obs = torch.from_numpy(next_obs_np).to(device)
    next_done = torch.zeros(args.num_envs, device=device)
    next_counted = np.ones(args.num_envs, dtype=bool)  # False: the step after an end (autoreset)
    global_step = 0
    stopped_early = False

    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            counted[step] = torch.from_numpy(next_counted)
            t = time.perf_counter()
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            actions_np = action.cpu().numpy()
            act_time += time.perf_counter() - t
            values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            t = time.perf_counter()
            next_obs_np, reward, terminated, truncated, infos = envs.step(actions_np)
            env_time += time.perf_counter() - t
            ended = np.logical_or(terminated, truncated)
            finished.step(reward, ended, next_counted)
            next_counted = ~ended
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            next_obs = torch.from_numpy(next_obs_np).to(device)  # the env's buffer: obs[step] copies it
            next_done = torch.as_tensor(ended, dtype=torch.float32, device=device)

        t = time.perf_counter()
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for s in reversed(range(args.num_steps)):
                if s == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[s + 1]
                    nextvalues = values[s + 1]
                delta = rewards[s] + args.gamma * nextvalues * nextnonterminal - values[s]
                advantages[s] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs = obs.reshape((-1, height, width, 3))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_inds = np.flatnonzero(counted.reshape(-1).numpy())  # autoreset steps are not trained on

        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for mb_inds in np.array_split(b_inds, args.num_minibatches):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]
                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break
        if device.type == "cuda":
            torch.cuda.synchronize()
        update_time += time.perf_counter() - t

        wall = time.perf_counter() - start
        learner = act_time + update_time
        record = {
            "iteration": iteration,
            "global_step": global_step,
            "episodes": finished.episodes,
            "return_mean_100": float(np.mean(finished.recent)) if finished.recent else None,
            "wall_s": round(wall, 2),
            "env_s": round(env_time, 2),
            "learner_s": round(learner, 2),
            "sps": round(global_step / wall, 1),
            "lr": optimizer.param_groups[0]["lr"],
            "value_loss": v_loss.item(),
            "policy_loss": pg_loss.item(),
            "entropy": entropy_loss.item(),
            "old_approx_kl": old_approx_kl.item(),
            "approx_kl": approx_kl.item(),
            "clipfrac": float(np.mean(clipfracs)),
        }
        progress.write(json.dumps(record) + "\n")
        progress.flush()
        if iteration == 1 or iteration % 10 == 0 or iteration == num_iterations:
            ret = "-" if record["return_mean_100"] is None else f"{record['return_mean_100']:.2f}"
            print(
                f"step {global_step:>8} | episodes {finished.episodes:>5} | return(100) {ret:>6} | "
                f"{record['sps']:.0f} steps/s (env {env_time:.0f} s, learner {learner:.0f} s of {wall:.0f} s)",
                flush=True,
            )
        if args.max_wall_seconds and wall >= args.max_wall_seconds and iteration < num_iterations:
            print(f"stopping at {global_step} steps: --max-wall-seconds {args.max_wall_seconds:g} reached", flush=True)
            stopped_early = True
            break

    wall = time.perf_counter() - start
    envs.close()
    progress.close()
    if args.save_model:
        torch.save(agent.state_dict(), os.path.join(args.logdir, "agent.pt"))
    learner = act_time + update_time
    summary = {
        "env_steps": global_step,
        "planned_steps": num_iterations * batch_size,
        "stopped_early": stopped_early,
        "wall_s": wall,
        "env_s": env_time,
        "learner_s": learner,
        "learner_act_s": act_time,
        "learner_update_s": update_time,
        "other_s": wall - env_time - learner,
        "steps_per_s": global_step / wall,
        "env_steps_per_s": global_step / env_time if env_time else None,
        "learner_steps_per_s": global_step / learner if learner else None,
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "vlmcrafter": vlmcrafter.__version__,
        "args": dataclasses.asdict(args),
        "crafter": score.compute(stats_path) if finished.episodes else None,
    }
    with open(os.path.join(args.logdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(
        f"{global_step} env steps in {wall:.1f} s: {summary['steps_per_s']:.0f} steps/s overall; "
        f"env {env_time:.1f} s ({summary['env_steps_per_s']:.0f} steps/s), learner {learner:.1f} s "
        f"({summary['learner_steps_per_s']:.0f} steps/s: act {act_time:.1f} s, update {update_time:.1f} s)"
    )
    metrics = summary["crafter"]
    if metrics:
        print(
            f"Crafter score {metrics['score']:.2f} % over {metrics['episodes']} episodes "
            f"(reward {metrics['reward_mean']:.2f}, length {metrics['length_mean']:.0f}); {stats_path}"
        )
    else:
        print(f"no episode finished in {global_step} steps: no Crafter score ({stats_path} is empty)")


if __name__ == "__main__":
    main()
