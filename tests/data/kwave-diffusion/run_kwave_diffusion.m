% k-Wave's kWaveDiffusion on the cases of tests/physics/test_heat_kwave.py (GNU Octave).
%   python tests/physics/test_heat_kwave.py --inputs DIR      (writes DIR/in_<case>.mat)
%   cd DIR && octave-cli --eval "addpath(KWAVE); addpath(STANDINS); run_kwave_diffusion"
%       (KWAVE: k-Wave's toolbox folder; STANDINS: standins/ here, first on the path: Octave
%       lacks datetime, which k-Wave's getDateString calls, and the insulating and conducting
%       cases call dtt1D/dtt2D, FFTW's REDFT00 / RODFT00 from the separate matlab-dtts MEX
%       library; the stand-ins compute those sums as matrices)
%   python tests/physics/test_heat_kwave.py --reference DIR   (writes reference.npz here)
1;
function out = field(v, sh)
  if numel(v) == 1, out = v; else, out = reshape(v, sh); end
end
function out = ref(v)
  if ischar(v), out = strtrim(v); else, out = v; end
end

files = dir('in_*.mat');
for i = 1:numel(files)
  d = load(files(i).name); name = files(i).name(4:end-4);
  s = double(d.shape); dx = 1e-3;
  switch numel(s)
    case 1, kgrid = kWaveGrid(s(1), dx); sh = [s(1), 1];
    case 2, kgrid = kWaveGrid(s(1), dx, s(2), dx); sh = s;
    case 3, kgrid = kWaveGrid(s(1), dx, s(2), dx, s(3), dx); sh = s;
  end
  medium = struct();
  medium.density = field(d.rho, sh); medium.specific_heat = field(d.C, sh);
  medium.thermal_conductivity = field(d.k, sh);
  medium.blood_density = d.rho_b; medium.blood_specific_heat = d.C_b;
  medium.blood_perfusion_rate = field(d.w_b, sh); medium.blood_ambient_temperature = d.Ta;
  medium.diffusion_coeff_ref = ref(d.dref); medium.perfusion_coeff_ref = ref(d.pref);
  medium.boundary_condition = strtrim(d.bc);
  source = struct(); source.T0 = field(d.T0, sh);
  if numel(d.Q) > 1 || d.Q ~= 0, source.Q = field(d.Q, sh); end
  kdiff = kWaveDiffusion(kgrid, medium, source, [], 'PlotSim', false, 'DisplayUpdates', false);
  kdiff.takeTimeStep(double(d.Nt), d.dt);
  T = kdiff.T; cem43 = kdiff.cem43; dt_limit = kdiff.dt_limit;
  save('-v7', ['out_' name '.mat'], 'T', 'cem43', 'dt_limit');
end
