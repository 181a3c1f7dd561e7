// plotly.js's cartesian bundle ships no types: the view declares the part it uses (charts.ts).
declare module 'plotly.js-cartesian-dist-min';
